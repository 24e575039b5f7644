package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Endpoint is one receiver: its URL and the secret its deliveries are
// signed with.
type Endpoint struct {
	URL    string
	Secret []byte
}

// Key names the endpoint in the store: the same on every node.
func (e Endpoint) Key() string {
	s := sha256.Sum256([]byte(e.URL))
	return hex.EncodeToString(s[:8])
}

// Label names the endpoint in metrics and on the dashboard: its host and
// path, without a query or credentials that may hold a secret.
func (e Endpoint) Label() string {
	u, err := url.Parse(e.URL)
	if err != nil {
		return e.Key()
	}
	return u.Host + u.Path
}

// Limits bound what the webhooks hold and how they deliver; zero fields
// take DefaultLimits'.
type Limits struct {
	FlushEvery time.Duration // the longest a change waits before it is written to the store
	MaxBatch   int           // events in one POST, and pending changes that flush at once
	Workers    int           // concurrent POSTs per endpoint (each takes its own users)
	Timeout    time.Duration // one POST
	BackoffMin time.Duration // after a failed POST: each wait is drawn from [0, backoff)
	BackoffMax time.Duration
	Poll       time.Duration // a worker with nothing to send looks at the store again
	Sweep      time.Duration // how often rows of dead nodes are looked for
	MaxPending int           // users whose change waits for the store at once; one more is dropped (counted)
}

// DefaultLimits: changes written within 100 ms, 100 events a POST, two
// POSTs at once per endpoint, 5 s each, back-off from 100 ms to a minute,
// the store looked at every second when idle and swept every 5 s, 100,000
// users waiting for the store at most.
func DefaultLimits() Limits {
	return Limits{FlushEvery: 100 * time.Millisecond, MaxBatch: 100, Workers: 2, Timeout: 5 * time.Second,
		BackoffMin: 100 * time.Millisecond, BackoffMax: time.Minute, Poll: time.Second, Sweep: 5 * time.Second, MaxPending: 100000}
}

func (l *Limits) defaults() {
	d := DefaultLimits()
	for _, p := range []struct{ v, d *time.Duration }{{&l.FlushEvery, &d.FlushEvery}, {&l.Timeout, &d.Timeout}, {&l.BackoffMin, &d.BackoffMin},
		{&l.BackoffMax, &d.BackoffMax}, {&l.Poll, &d.Poll}, {&l.Sweep, &d.Sweep}} {
		if *p.v <= 0 {
			*p.v = *p.d
		}
	}
	for _, p := range []struct{ v, d *int }{{&l.MaxBatch, &d.MaxBatch}, {&l.Workers, &d.Workers}, {&l.MaxPending, &d.MaxPending}} {
		if *p.v <= 0 {
			*p.v = *p.d
		}
	}
}

// Shards are the parts a user falls into (by a hash of its id): each of an
// endpoint's workers takes its own, so a user's changes go out in order.
const Shards = 8

func shardOf(user string) int {
	h := fnv.New32a()
	h.Write([]byte(user))
	return int(h.Sum32() % Shards)
}

// Config is a node's webhooks.
type Config struct {
	Endpoints []Endpoint
	Node      string          // this node: the owner of the rows it writes
	Store     store.HookStore // every node's
	// Owns reports whether this node owns the user's view now: it claims
	// the rows of a dead node for those users.
	Owns func(user string) bool
	// Alive lists the members alive (their ids): a row of another owner is
	// an orphan.
	Alive func() []string
	// Query is the user's state as its view answers a lookup now
	// (actors.Node.Query): what a claimed row is checked against, since
	// its dead owner may have published a change it had not written.
	Query      func(ctx context.Context, user string) (*messages.ViewState, error)
	Limits     Limits
	Client     *http.Client // nil: one with Limits.Timeout
	Log        *slog.Logger
	Registerer prometheus.Registerer // nil: not registered
}

// Hooks are a node's webhooks: safe for concurrent use; Changed never
// blocks.
type Hooks struct {
	cfg    Config
	eps    []*endpoint
	m      *metrics
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	pending map[string]Event // by user, the latest version
	drops   burst
	kick    chan struct{}

	// recheck are the rows to check against their user's view (claimed
	// from a dead owner, or this node's from before it started), by
	// endpoint and user: what the receiver was last sent (sweep.go).
	recheck map[*endpoint]map[string]store.HookRow
	started time.Time
}

// ErrConfig is wrapped by an invalid configuration.
var ErrConfig = errors.New("webhook: config")

// Start makes the webhooks and starts their writer, workers and sweep.
func Start(cfg Config) (*Hooks, error) {
	if cfg.Store == nil || cfg.Owns == nil || cfg.Alive == nil || cfg.Query == nil || cfg.Node == "" {
		return nil, fmt.Errorf("%w: Store, Owns, Alive, Query and Node are required", ErrConfig)
	}
	cfg.Limits.defaults()
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.Limits.Timeout}
	}
	h := &Hooks{cfg: cfg, pending: map[string]Event{}, kick: make(chan struct{}, 1), recheck: map[*endpoint]map[string]store.HookRow{}, started: time.Now()}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.m = newMetrics(cfg.Registerer, func() float64 { return float64(h.pendingLen()) })
	for _, e := range cfg.Endpoints {
		ep := newEndpoint(h, e)
		h.eps = append(h.eps, ep)
		for w := range cfg.Limits.Workers {
			h.wg.Add(1)
			go func() { defer h.wg.Done(); ep.work(w) }()
		}
	}
	h.wg.Add(2)
	go func() { defer h.wg.Done(); h.flushLoop() }()
	go func() { defer h.wg.Done(); h.sweepLoop() }()
	return h, nil
}

// Changed takes a user's change: the latest per user waits at most
// FlushEvery for the store. It never blocks; beyond MaxPending users
// waiting (the store is slow or down) a change of one more is dropped and
// counted.
func (h *Hooks) Changed(ev Event) {
	h.mu.Lock()
	old, ok := h.pending[ev.User]
	switch {
	case ok && old.Version >= ev.Version:
	case !ok && len(h.pending) >= h.cfg.Limits.MaxPending:
		h.mu.Unlock()
		h.m.dropped.Inc()
		h.drops.note(h.cfg.Log, "webhook: changes dropped: too many users waiting for the store", "max_pending", h.cfg.Limits.MaxPending)
		return
	default:
		h.pending[ev.User] = ev
	}
	full := len(h.pending) >= h.cfg.Limits.MaxBatch
	h.mu.Unlock()
	if full {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

func (h *Hooks) pendingLen() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pending)
}

// Stop writes what is pending, then stops delivering.
func (h *Hooks) Stop() {
	h.flush()
	h.cancel()
	h.wg.Wait()
}

// flushLoop writes the pending changes every FlushEvery, or at once when
// MaxBatch users wait.
func (h *Hooks) flushLoop() {
	t := time.NewTicker(h.cfg.Limits.FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		case <-h.kick:
		}
		h.flush()
	}
}

// flush writes the pending changes as one transaction of a row per
// endpoint and user; on an error they wait for the next flush (a newer
// change of a user replaces its own).
func (h *Hooks) flush() {
	h.mu.Lock()
	evs := h.pending
	if len(evs) == 0 {
		h.mu.Unlock()
		return
	}
	h.pending = map[string]Event{}
	h.mu.Unlock()
	rows := make([]store.HookRow, 0, len(evs)*len(h.eps))
	for _, ev := range evs {
		body, err := json.Marshal(ev)
		if err != nil {
			continue // an Event always marshals
		}
		for _, ep := range h.eps {
			rows = append(rows, store.HookRow{Endpoint: ep.key, User: ev.User, Version: ev.Version, Owner: h.cfg.Node, Shard: shardOf(ev.User), AtMs: ev.AtMs, Body: body})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.Limits.Timeout)
	defer cancel()
	if err := h.cfg.Store.PutHooks(ctx, rows); err != nil {
		h.m.storeErrors.Inc()
		h.drops.note(h.cfg.Log, "webhook: writing changes to the store failed: kept for the next flush", "err", err)
		h.requeue(evs)
		return
	}
	h.m.queued.Add(float64(len(evs)))
	for _, ep := range h.eps {
		ep.notify()
	}
}

// requeue puts back changes a failed flush took, unless newer ones came.
func (h *Hooks) requeue(evs map[string]Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for u, ev := range evs {
		if cur, ok := h.pending[u]; !ok || cur.Version < ev.Version {
			if !ok && len(h.pending) >= h.cfg.Limits.MaxPending {
				h.m.dropped.Inc()
				continue
			}
			h.pending[u] = ev
		}
	}
}

// burst logs a repeated failure once per minute with the count since.
type burst struct {
	mu    sync.Mutex
	last  time.Time
	count int
}

func (b *burst) note(log *slog.Logger, msg string, args ...any) {
	b.mu.Lock()
	b.count++
	if time.Since(b.last) < time.Minute {
		b.mu.Unlock()
		return
	}
	n := b.count
	b.last, b.count = time.Now(), 0
	b.mu.Unlock()
	log.Warn(msg, append(args, "times", n)...)
}
