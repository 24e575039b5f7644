package admin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The hostile-client suite of the admin API: each probe with the answer
// docs/operations.md gives it, and nothing written.
func TestHostileBodies(t *testing.T) {
	f := newFixture(t, "")
	huge := strings.Repeat("a", 3900000)
	many := strings.TrimSuffix(strings.Repeat(`"x",`, 5001), ",")
	for _, p := range []struct {
		name, method, path, body string
		status                   int
		says                     string
	}{
		{"two JSON values", "PUT", "/api/users/alice/policy", `{"granularity":"exact"} {"granularity":"hidden"}`, 400, "more than one JSON value"},
		{"trailing garbage", "PUT", "/api/users/alice/policy", `{"granularity":"exact"}x`, 400, "more than one JSON value"},
		{"unknown field", "PUT", "/api/users/alice/policy", `{"granularity":"exact","friends":[]}`, 400, "friends"},
		{"dot-dot user", "PUT", "/api/users/a..b/policy", `{"granularity":"exact"}`, 400, `has \"..\"`},
		{"dot-dot contact", "PUT", "/api/users/alice/policy", `{"granularity":"exact","contacts":[".."]}`, 400, `has \"..\"`},
		{"bidi override contact", "PUT", "/api/users/alice/policy", `{"granularity":"exact","contacts":["bob\u202e"]}`, 400, "only letters"},
		{"control character contact", "PUT", "/api/users/alice/policy", `{"granularity":"exact","blocked":["a\u0007"]}`, 400, "only letters"},
		{"3.9 MB contact", "PUT", "/api/users/alice/policy", `{"granularity":"exact","contacts":["` + huge + `"]}`, 400, "3900000"},
		{"5001 contacts", "PUT", "/api/users/alice/policy", `{"granularity":"exact","contacts":[` + many + `]}`, 400, "5001"},
		{"body over 4 MiB", "PUT", "/api/users/alice/policy", `{"granularity":"exact","contacts":["` + huge + huge + `"]}`, 400, "too large"},
		{"batch, two values", "POST", "/api/presence/batch", `{"users":["alice"]}{"users":["bob"]}`, 400, "more than one JSON value"},
		{"batch, bad id", "POST", "/api/presence/batch", `{"users":["a..b"]}`, 200, `"status":"unknown"`},
	} {
		t.Run(p.name, func(t *testing.T) {
			code, body := f.do(t, p.method, p.path, p.body)
			if code != p.status || !strings.Contains(body, p.says) {
				t.Fatalf("%d %.200s, want %d saying %q", code, body, p.status, p.says)
			}
		})
	}
	if code, body := f.do(t, "GET", "/api/users/alice/policy", ""); code != 404 {
		t.Fatalf("after refused writes the policy is %d %s, want none (404)", code, body)
	}
}

// The Host header must name this node: a DNS-rebound page sends its own
// name. IP addresses, localhost, the listen address and the allowed hosts
// pass; anything else is 421 and reaches no handler.
func TestHostileHost(t *testing.T) {
	f := newFixture(t, "", func(s *Server) { s.Addr, s.AllowedHosts = "admin.internal:7700", []string{"presence.example.com"} })
	for _, p := range []struct {
		host   string
		status int
	}{
		{"", 200}, // the test server's 127.0.0.1:port
		{"localhost:7700", 200},
		{"[::1]:7700", 200},
		{"10.1.2.3:7700", 200},
		{"admin.internal:7700", 200},
		{"presence.example.com", 200},
		{"PRESENCE.example.com:443", 200},
		{"attacker.example:7700", 421},
		{"admin.internal.attacker.example", 421},
		{"localhost.attacker.example", 421},
	} {
		req, _ := http.NewRequest("GET", f.srv.URL+"/api/bounds", nil)
		if p.host != "" {
			req.Host = p.host
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != p.status {
			t.Errorf("Host %q: %d %s, want %d", p.host, res.StatusCode, b, p.status)
		}
		if p.status == 421 && !strings.Contains(string(b), "admin-allowed-hosts") {
			t.Errorf("Host %q: %s does not say what to do", p.host, b)
		}
	}
}

// Without the token a request gets 401 and its connection is closed: what
// the client pipelined behind it is never answered.
func TestHostileUnauthorizedCloses(t *testing.T) {
	f := newFixture(t, "s3cret")
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	req := "GET /api/bounds HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	fmt.Fprint(conn, req+req+req)
	r := bufio.NewReader(conn)
	res, err := http.ReadResponse(r, nil)
	if err != nil || res.StatusCode != 401 || !res.Close {
		t.Fatalf("first: %v %v, want 401 with Connection: close", res, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	if res, err := http.ReadResponse(r, nil); err == nil {
		t.Fatalf("a pipelined request was answered after the 401: %d", res.StatusCode)
	}
}

// Event streams are capped: one more than the cap gets 503 with a reason
// and Retry-After; closing one frees its place.
func TestHostileEventStreamCap(t *testing.T) {
	const limit = 3
	f := newFixture(t, "", func(s *Server) { s.MaxEventStreams = limit })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func() *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/api/events", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var streams []*http.Response
	for range limit {
		res := open()
		if res.StatusCode != 200 {
			t.Fatalf("stream %d: %d", len(streams)+1, res.StatusCode)
		}
		streams = append(streams, res)
	}
	res := open()
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "event streams open") {
		t.Fatalf("stream over the cap: %d %s %v", res.StatusCode, b, res.Header)
	}
	streams[0].Body.Close()
	waitOpen := time.Now().Add(5 * time.Second)
	for {
		res := open()
		if res.StatusCode == 200 {
			res.Body.Close()
			break
		}
		res.Body.Close()
		if time.Now().After(waitOpen) {
			t.Fatalf("a closed stream's place was not freed: %d", res.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, s := range streams[1:] {
		s.Body.Close()
	}
}
