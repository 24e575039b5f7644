package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/presence-im/presence/config"
)

// The demo page (client/js/demo.html), read once.
var demoPage = newAsset("demo.html", "text/html; charset=utf-8")

// DemoTokenTTL is how long a demo token lives unless the request asks
// for less or more (ttl, in seconds, 1 to 86400).
const DemoTokenTTL = time.Hour

// demoRoutes adds the demo page at GET /demo and its token endpoint at
// POST /demo/token; both answer 403 on a node that may not run it
// (DemoAllowed).
func (s *Server) demoRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /demo", s.serveDemo)
	mux.HandleFunc("POST /demo/token", s.demoToken)
}

// DemoAllowed reports whether a node with this token secret listening on
// addr may mint demo tokens: only with the public development secret
// (config.DevSecret, whose tokens anyone can make anyway) on a loopback
// device listener. Any other node serves no demo and mints nothing.
func DemoAllowed(secret []byte, addr string) bool {
	return string(secret) == config.DevSecret && config.Loopback(addr)
}

func (s *Server) demoAllowed(w http.ResponseWriter, r *http.Request) bool {
	if DemoAllowed(s.tokens.Key, s.Addr()) && config.Loopback(r.Host) {
		return true
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "the demo is off on this node: it runs only on a node started with the development secret "+
		"(no --secret) whose device listener (--listen) is on loopback, as `make run` starts them", http.StatusForbidden)
	return false
}

// serveDemo is the demo page (client/js/demo.html). Its policy lets the
// SDK time heartbeats in a Worker made from a blob: URL (worker-src).
func (s *Server) serveDemo(w http.ResponseWriter, r *http.Request) {
	if !s.demoAllowed(w, r) {
		return
	}
	w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self' ws: wss: http: https:; script-src 'self' 'unsafe-inline' http: https:; worker-src blob:; style-src 'unsafe-inline'")
	serveAsset(demoPage)(w, r)
}

// demoToken mints a device token for ?user= and ?device= (ttl: ?ttl=
// seconds), answered as JSON {token, user, device, expires_ms}. A POST
// with no body is a simple request, readable from the other nodes' demo
// pages (their refresh asks any node that is up).
func (s *Server) demoToken(w http.ResponseWriter, r *http.Request) {
	if !s.demoAllowed(w, r) {
		return
	}
	q := r.URL.Query()
	ttl := DemoTokenTTL
	if v := q.Get("ttl"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 86400 {
			http.Error(w, "ttl must be 1 to 86400 seconds", http.StatusBadRequest)
			return
		}
		ttl = time.Duration(n) * time.Second
	}
	tok, err := s.tokens.Mint(q.Get("user"), q.Get("device"), ttl)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	claims, err := s.tokens.Verify(tok)
	if err != nil { // a ttl of 1 s can end within the second it was cut to
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Access-Control-Allow-Origin", "*")
	_ = json.NewEncoder(w).Encode(map[string]any{"token": tok, "user": claims.User, "device": claims.Device, "expires_ms": claims.Expires.UnixMilli()})
}
