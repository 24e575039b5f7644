package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDemoStatusLine(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/cluster" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, `{"self":"n1","members":[{"id":"n1","state":"alive"},{"id":"n2","state":"dead"},{"id":"n3","state":"alive"}],
			"actors":{"n1":{"connection":7,"lease":8,"view":9},"n3":{"connection":1}}}`)
	}))
	defer srv.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	line := statusLine(demoFlags{admin: []string{srv.URL, dead.URL}, token: "tok"})
	if !strings.Contains(line, "n1[2]   7 dev   8/9") || !strings.Contains(line, strings.TrimPrefix(dead.URL, "http://")+" down") {
		t.Fatalf("status line: %q", line)
	}
	if line := statusLine(demoFlags{admin: []string{srv.URL}, token: "wrong"}); !strings.Contains(line, "down") {
		t.Fatalf("a node that refuses is not counted: %q", line)
	}
}

func TestDemoFlags(t *testing.T) {
	for _, args := range [][]string{{"--devices", "0"}, {"--ws", ""}, {"--life", "0s"}} {
		if _, err := parseDemo(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	d, err := parseDemo([]string{"--ws", "ws://a/ws, ws://b/ws"}, io.Discard)
	if err != nil || len(d.ws) != 2 || d.ws[1] != "ws://b/ws" || d.secret == "" {
		t.Fatalf("%+v %v", d, err)
	}
}

func TestReady(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" && ready {
			return
		}
		http.Error(w, "draining", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	if code := run([]string{"ready", "--admin", srv.URL}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("ready node: exit %d", code)
	}
	ready = false
	if code := run([]string{"ready", "--admin", srv.URL}, io.Discard, io.Discard); code != 1 {
		t.Fatalf("draining node: exit %d", code)
	}
}
