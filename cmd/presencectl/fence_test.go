package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// serve-alone POSTs with the token and says what went wrong otherwise: a
// node that serves already (404 there), a wrong token.
func TestServeAlone(t *testing.T) {
	fenced := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !fenced || r.URL.Path != "/api/fence/serve-alone" || r.Method != "POST":
			http.NotFound(w, r)
		case r.Header.Get("Authorization") != "Bearer tok":
			http.Error(w, `{"error":"admin: bearer token required"}`, http.StatusUnauthorized)
		default:
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"status":"serving alone as a new cluster"}`))
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name   string
		token  string
		fenced bool
		code   int
		says   string
	}{
		{"fenced, with the token", "tok", true, 0, "serving alone"},
		{"a wrong token", "nope", true, 1, "401"},
		{"not fenced", "tok", false, 1, "not fenced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fenced = tc.fenced
			var out, errOut bytes.Buffer
			code := run([]string{"serve-alone", "--admin", srv.URL, "--admin-token", tc.token}, &out, &errOut)
			if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.says) {
				t.Fatalf("exit %d, out %q, err %q; want %d and %q", code, out.String(), errOut.String(), tc.code, tc.says)
			}
		})
	}
}
