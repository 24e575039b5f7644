package loadbench

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The lookup client reads whole answers over one connection, dials again
// once when the server closed it while idle, and reports a status other
// than 200 as a failed lookup.
func TestLookupClient(t *testing.T) {
	var conns int
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(strings.Repeat("x", 3000) + r.URL.Path))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns++
		}
	}
	srv.Start()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	errs := make(chan error, 4)
	go func() {
		c := newLookupClient(addr)
		defer c.Close()
		errs <- c.Get(lookupRequest(addr, "/a", "Authorization: Bearer tok"))
		errs <- c.Get(lookupRequest(addr, "/b", "Authorization: Bearer tok"))
		srv.CloseClientConnections()
		errs <- c.Get(lookupRequest(addr, "/c", "Authorization: Bearer tok"))
		errs <- c.Get(lookupRequest(addr, "/d"))
	}()
	for i, want := range []string{"", "", "", "HTTP 401"} {
		err := <-errs
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Fatalf("lookup %d: %v, want %q", i, err, want)
		}
	}
	if conns != 2 {
		t.Fatalf("%d connections, want 2 (one closed by the server while idle)", conns)
	}
}
