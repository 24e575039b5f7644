package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/prometheus/client_golang/prometheus"
)

// rejoinEnv carries, from a fenced node to the incarnation it re-executes,
// the cluster.Rejoin as JSON: the new one retries its seeds until the
// split-brain resolver lets it serve, instead of giving up.
const rejoinEnv = "PRESENCE_REJOIN"

// rejoinState reads rejoinEnv: nil for a node started normally.
func rejoinState() (*cluster.Rejoin, error) {
	s := os.Getenv(rejoinEnv)
	if s == "" {
		return nil, nil
	}
	var r cluster.Rejoin
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, errors.New(rejoinEnv + ": " + err.Error())
	}
	return &r, nil
}

// fencedAdmin is the admin API of a fenced node while it waits to rejoin
// (the full one starts once it serves): /healthz answers, /readyz says 503,
// GET /api/fence tells why it waits, and POST /api/fence/serve-alone, with
// the admin token, makes it serve as a new cluster (the operator's way out
// when no rule can decide, e.g. the last survivor of two crashes at once).
type fencedAdmin struct {
	srv   *http.Server
	alone chan struct{}
	once  sync.Once
}

func startFencedAdmin(addr, token string, r *cluster.Rejoin, log *slog.Logger) (*fencedAdmin, error) {
	f := &fencedAdmin{alone: make(chan struct{})}
	r.Alone = f.alone
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "fenced: waiting to rejoin", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("GET /api/fence", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"fenced": true, "since": r.Fenced, "base": r.Base, "stable_ms": r.Stable.Milliseconds()})
	})
	mux.HandleFunc("POST /api/fence/serve-alone", func(w http.ResponseWriter, req *http.Request) {
		switch {
		case token == "":
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "fence: serve-alone needs an admin token (--admin-token)"})
		case subtle.ConstantTimeCompare([]byte(req.Header.Get("Authorization")), []byte("Bearer "+token)) != 1:
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "admin: bearer token required"})
		default:
			log.Warn("fenced: an operator asked this node to serve alone", "from", req.RemoteAddr)
			f.once.Do(func() { close(f.alone) })
			writeJSON(w, http.StatusAccepted, map[string]string{"status": "serving alone as a new cluster"})
		}
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// stop frees the admin address for the full API.
func (f *fencedAdmin) stop() {
	if f == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = f.srv.Shutdown(ctx)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fenceCause is what the fence watch saw: why, and the quorum base.
type fenceCause struct {
	detail string
	base   []cluster.Voter
}

// prepareRejoin, in a fenced node's new incarnation, reads what the fenced
// one left, opens the fenced admin API until the node serves (stop it
// then; a nil one stops as nothing) and waits until it can bind its gossip
// address (awaitAddress).
func prepareRejoin(ctx context.Context, cfg config.Config, log *slog.Logger) (*cluster.Rejoin, *fencedAdmin, error) {
	r, err := rejoinState()
	if r == nil || err != nil {
		return nil, nil, err
	}
	f, err := startFencedAdmin(cfg.Admin, cfg.AdminToken, r, log)
	if err != nil {
		return nil, nil, fmt.Errorf("admin: %w", err)
	}
	host, _, _ := net.SplitHostPort(cfg.Gossip)
	if err := awaitAddress(ctx, host, addressWait, log); err != nil {
		f.stop()
		return nil, nil, err
	}
	return r, f, nil
}

// addressWait bounds the back-off of awaitAddress.
const addressWait = 15 * time.Second

// awaitAddress waits until host is an address of this machine: a node
// fenced because its network went away (an interface down, a container
// disconnected from its network) cannot bind its gossip and actor address
// until it comes back, and a process that exited instead would lose what
// its fenced incarnation knew (a supervisor's restart starts a node
// afresh, which must not serve on its own side of a partition). One line
// per try, back-off from 1 s doubling up to most; it gives up only when
// ctx ends. Any other bind error is left for the start to report.
func awaitAddress(ctx context.Context, host string, most time.Duration, log *slog.Logger) error {
	wait := min(time.Second, most)
	for try := 1; ; try++ {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err == nil {
			return ln.Close()
		}
		if !errors.Is(err, syscall.EADDRNOTAVAIL) {
			return nil
		}
		log.Warn("fenced: this node's address is not up; waiting for it", "host", host, "try", try, "next_in", wait, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for address %s: %w", host, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, most)
	}
}

// fenceGauge is presence_last_fence_timestamp_seconds: when this process's
// node last fenced (it re-executed since, so a counter would start again
// at 0), 0 if it never did.
func fenceGauge(r *cluster.Rejoin) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "presence_last_fence_timestamp_seconds",
		Help: "Unix time this node last fenced itself (left, drained, re-executed); 0: never since it was started by hand.",
	})
	if r != nil {
		g.Set(float64(r.Fenced.UnixNano()) / 1e9)
	}
	return g
}
