package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
)

// A rolling deploy: every node in turn gets SIGTERM (it drains: devices
// closed with 1001 over DrainSpread), exits and starts again under the same
// id and addresses. Devices and watchers are Go SDK sessions over every
// node's URL, which move to the next node on 1001. Nothing may show: no
// offline, no version going back, no node fencing.

// sdkWatcher records what a watcher session delivers.
type sdkWatcher struct {
	s      *client.Session
	mu     sync.Mutex
	events []Event
}

func (w *sdkWatcher) record() {
	for ev := range w.s.Events() {
		p := ev.Presence
		w.mu.Lock()
		w.events = append(w.events, eventOf(p, ev.Snapshot))
		w.mu.Unlock()
	}
}

// sessions starts n SDK sessions for users prefix000..., each with the
// node URLs starting at a different node.
func (e *Env) sessions(ctx context.Context, users []string) ([]*client.Session, error) {
	var urls []string
	for _, n := range e.Cluster.Nodes {
		urls = append(urls, "ws://"+n.Listen+"/ws")
	}
	log, err := e.sdkLogger()
	if err != nil {
		return nil, err
	}
	var out []*client.Session
	for i, u := range users {
		tok, err := gateway.Tokens{Key: []byte(e.Fleet.Secret)}.Mint(u, "phone", time.Hour)
		if err != nil {
			return nil, err
		}
		k := i % len(urls)
		out = append(out, client.Start(ctx, client.Config{URLs: append(urls[k:len(urls):len(urls)], urls[:k]...), Token: tok, Log: log.With("user", u)}))
	}
	return out, nil
}

// sdkLogger is the SDK sessions' debug log, sdk.log in the round's
// directory next to the nodes' (each failed connect, its error and the
// wait before the next: what a slow reconnect did).
func (e *Env) sdkLogger() (*slog.Logger, error) {
	if e.sdkLog == nil {
		f, err := os.OpenFile(filepath.Join(e.Cluster.Dir, "sdk.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		e.sdkLog = f
	}
	return slog.New(slog.NewTextHandler(e.sdkLog, &slog.HandlerOptions{Level: slog.LevelDebug})), nil
}

func runRolling(ctx context.Context, e *Env, r *Round) error {
	f, err := e.startSDKFleet(ctx)
	if err != nil {
		return err
	}
	devices, recs, users := f.devices, f.watchers, f.users
	r.Fault = fmt.Sprintf("SIGTERM and restart each of %d nodes in turn; %d SDK devices", len(e.Cluster.Nodes), len(users))
	t0 := time.Now()
	for _, n := range e.Cluster.Nodes {
		if err := e.restartOne(ctx, r, n, devices); err != nil {
			return err
		}
	}
	time.Sleep(ms(e.Timing["settle_ms"]))
	e.checkRolling(r, recs, users, t0)
	return nil
}

// restartOne restarts n and records, for each device that was connected
// to it, how long it went without a connection: from its close (1001, at
// its place in the drain spread) to its next connection, within the
// debounce, or its view would publish it offline.
func (e *Env) restartOne(ctx context.Context, r *Round, n *Node, devices []*client.Session) error {
	t := time.Now()
	stop := make(chan struct{})
	gaps := make(chan []time.Duration)
	go func() { gaps <- reconnectGaps(devices, stop) }()
	err := e.Cluster.Restart(ctx, n)
	if err == nil {
		e.awaitConvergence(ctx, r, "join_convergence", time.Now(), cluster.Convergence(e.Cluster.preset(), len(e.Cluster.Nodes)))
		err = e.Cluster.Converged(ctx, e.Cluster.Nodes...)
	}
	close(stop)
	moved := <-gaps
	if err != nil {
		return err
	}
	for i, d := range moved {
		if d >= 0 {
			r.Latencies = append(r.Latencies, Latency{Device: fmt.Sprintf("r%03d", i), Watcher: n.ID, Bound: "rolling_reconnect", Ms: float64(d.Microseconds()) / 1000, BoundMs: e.Timing["debounce_ms"]})
		}
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%s restarted in %.1f s", n.ID, time.Since(t).Seconds()))
	// The restart moved identities: let them settle before the next.
	time.Sleep(ms(e.Timing["settle_ms"]))
	return nil
}

// reconnectGaps polls the devices every 5 ms until stop is closed and
// answers, for each that connected again meanwhile, how long it went
// without a connection (client.Session.Gap: from its close to the next
// hello, when its device is registered again); -1 for a device that did
// not reconnect.
func reconnectGaps(devices []*client.Session, stop <-chan struct{}) []time.Duration {
	gap := make([]time.Duration, len(devices))
	before := make([]int, len(devices))
	for i, d := range devices {
		gap[i], before[i] = -1, d.Connections()
	}
	for {
		for i, d := range devices {
			if gap[i] < 0 && d.Connections() > before[i] {
				gap[i] = d.Gap()
			}
		}
		select {
		case <-stop:
			return gap
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// allOnline waits until every watcher holds every user online.
func allOnline(recs []*sdkWatcher, users []string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for _, w := range recs {
		for _, u := range users {
			for {
				if p, ok := w.s.State(u); ok && p.GetStatus() == messages.Status_online {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("chaos: a watcher does not see %s online", u)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	return nil
}

// checkRolling: no offline after t0, versions never back, all online at
// the end, and no node fenced (its log).
func (e *Env) checkRolling(r *Round, recs []*sdkWatcher, users []string, t0 time.Time) {
	checkWatchers(r, recs, t0, func(string) bool { return true }, "the rolling restart")
	if err := allOnline(recs, users, 10*time.Second); err != nil {
		r.find("wrong_final", "", "", err.Error())
	}
	for _, n := range e.Cluster.Nodes {
		if strings.Contains(n.Log(), "fenced:") {
			r.find("fenced", "", "", n.ID+" fenced during the rolling restart")
		}
	}
}

// checkWatchers: since t0, no offline at any watcher for a target that
// stayed (what the fault was), and no version going back within one
// subscription (a snapshot may start over with a view created anew).
func checkWatchers(r *Round, recs []*sdkWatcher, t0 time.Time, stayed func(target string) bool, what string) {
	for i, w := range recs {
		w.mu.Lock()
		last := map[string]uint64{}
		for _, ev := range w.events {
			if ev.At.After(t0) && ev.Status == messages.Status_offline && stayed(ev.Target) {
				r.findAt(ev.At, "false_offline", ev.Target, fmt.Sprint("rwatch-", i), fmt.Sprintf("offline at version %d (snapshot %v) during %s", ev.Version, ev.Snapshot, what))
			}
			if v, ok := last[ev.Target]; ok && ev.Version < v && !ev.Snapshot {
				r.find("version_regression", ev.Target, fmt.Sprint("rwatch-", i), fmt.Sprintf("version %d after %d", ev.Version, v))
			}
			if ev.Snapshot {
				last[ev.Target] = ev.Version
			}
			last[ev.Target] = max(last[ev.Target], ev.Version)
		}
		w.mu.Unlock()
	}
}
