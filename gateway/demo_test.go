package gateway

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/config"
)

// devServer is a second device listener on nd's actors at listen, keyed
// with secret.
func devServer(t *testing.T, nd *node, listen, key string) *Server {
	t.Helper()
	srv := New(Options{Listen: listen, CloseGrace: 200 * time.Millisecond}, nd.n.Gateway(), nd.timing, []byte(key), nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func do(t *testing.T, method, u, host string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	if host != "" {
		req.Host = host
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// With the development secret on loopback, /demo is the page and
// /demo/token mints a token of that secret for the user and device asked.
func TestDemoOnADevelopmentNode(t *testing.T) {
	nd := startNode(t)
	srv := devServer(t, nd, "127.0.0.1:0", config.DevSecret)
	base := "http://" + srv.Addr()
	code, body, h := do(t, "GET", base+"/demo", "")
	if code != 200 || !strings.Contains(body, "/sdk/presence.js") || h.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /demo: %d %v", code, h)
	}
	code, body, h = do(t, "POST", base+"/demo/token?user=demo-001&device=web-1&ttl=60", "")
	var got struct {
		Token, User, Device string
		ExpiresMs           int64 `json:"expires_ms"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("POST /demo/token: %d %q", code, body)
	}
	c, err := Tokens{Key: []byte(config.DevSecret)}.Verify(got.Token)
	if err != nil || c.User != "demo-001" || c.Device != "web-1" || c.Expires.UnixMilli() != got.ExpiresMs || time.Until(c.Expires) > time.Minute {
		t.Fatalf("token %+v: %+v %v", got, c, err)
	}
	for _, q := range []string{"user=demo-001&device=a/b", "user=&device=web", "user=u&device=d&ttl=0", "user=u&device=d&ttl=x"} {
		if code, body, _ := do(t, "POST", base+"/demo/token?"+q, ""); code != 400 || strings.Contains(body, "token") {
			t.Errorf("POST /demo/token?%s: %d %q, want 400", q, code, body)
		}
	}
	// a page reached through a name that is not loopback (DNS rebinding)
	if code, _, _ := do(t, "POST", base+"/demo/token?user=u&device=d", "evil.example:80"); code != 403 {
		t.Errorf("Host evil.example: %d, want 403", code)
	}
	http.DefaultClient.CloseIdleConnections()
}

// Any other node says the demo is off and mints nothing: one with another
// secret, and one with the development secret on a listener that is not
// loopback.
func TestDemoOffWithoutTheDevelopmentSecret(t *testing.T) {
	nd := startNode(t) // the test secret
	base := "http://" + nd.srv.Addr()
	for _, r := range []struct{ method, path string }{{"GET", "/demo"}, {"POST", "/demo/token?user=demo-001&device=web-1"}} {
		code, body, _ := do(t, r.method, base+r.path, "")
		if code != http.StatusForbidden || !strings.Contains(body, "the demo is off") || strings.Contains(body, `"token"`) {
			t.Errorf("%s %s: %d %q, want 403 saying it is off", r.method, r.path, code, body)
		}
	}
	// the development secret on a listener that is not loopback (every
	// address): reached through loopback, it still mints nothing
	open := devServer(t, nd, "0.0.0.0:0", config.DevSecret)
	_, port, _ := net.SplitHostPort(open.Addr())
	for _, r := range []struct{ method, path string }{{"GET", "/demo"}, {"POST", "/demo/token?user=demo-001&device=web-1"}} {
		code, body, _ := do(t, r.method, "http://127.0.0.1:"+port+r.path, "")
		if code != http.StatusForbidden || !strings.Contains(body, "the demo is off") || strings.Contains(body, `"token"`) {
			t.Errorf("%s %s on %s with the development secret: %d %q, want 403 saying it is off", r.method, r.path, open.Addr(), code, body)
		}
	}
	for _, c := range []struct {
		secret, addr string
		want         bool
	}{
		{config.DevSecret, "127.0.0.1:7600", true}, {config.DevSecret, "[::1]:7600", true}, {config.DevSecret, "localhost:7600", true},
		{config.DevSecret, "0.0.0.0:7600", false}, {config.DevSecret, ":7600", false}, {config.DevSecret, "10.0.0.5:7600", false},
		{config.DevSecret, "presence.example:7600", false}, {"a-real-secret", "127.0.0.1:7600", false},
	} {
		if got := DemoAllowed([]byte(c.secret), c.addr); got != c.want {
			t.Errorf("DemoAllowed(%q, %s) = %v, want %v", c.secret, c.addr, got, c.want)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}
