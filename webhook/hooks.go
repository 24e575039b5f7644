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
	"math/rand/v2"
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
	MaxBatch   int           // events in one POST; changes waiting for the store that flush at once
	Workers    int           // concurrent POSTs per endpoint (each takes its own users)
	Timeout    time.Duration // one POST, one store call
	BackoffMin time.Duration // after a failed POST: each wait is drawn from [0, backoff)
	BackoffMax time.Duration // the back-off doubles up to it (--webhook-retry-max)
	Poll       time.Duration // a worker with nothing in memory looks at the store this often
	Sweep      time.Duration // how often rows of dead nodes are looked for
	MaxPending int           // users whose changes wait for the store at once; a change of one more is dropped (counted)
	// MaxBacklog is the changes an endpoint holds in memory, waiting for
	// the store or the receiver (--webhook-backlog). Under it every change
	// is delivered; over it a user's waiting changes are coalesced into her
	// latest, and the changes of the users waiting longest are left to
	// their rows in the store (counted in presence_webhook_coalesced_total).
	MaxBacklog int
}

// DefaultLimits: changes written within 100 ms, 100 events a POST, two
// POSTs at once per endpoint, 5 s each, back-off from 100 ms to a minute,
// the store looked at every second when idle and swept every 5 s, 100,000
// users waiting for the store and 10,000 changes in memory per endpoint at
// most.
func DefaultLimits() Limits {
	return Limits{FlushEvery: 100 * time.Millisecond, MaxBatch: 100, Workers: 2, Timeout: 5 * time.Second,
		BackoffMin: 100 * time.Millisecond, BackoffMax: time.Minute, Poll: time.Second, Sweep: 5 * time.Second, MaxPending: 100000,
		MaxBacklog: 10000}
}

func (l *Limits) defaults() {
	d := DefaultLimits()
	for _, p := range []struct{ v, d *time.Duration }{{&l.FlushEvery, &d.FlushEvery}, {&l.Timeout, &d.Timeout}, {&l.BackoffMin, &d.BackoffMin},
		{&l.BackoffMax, &d.BackoffMax}, {&l.Poll, &d.Poll}, {&l.Sweep, &d.Sweep}} {
		if *p.v <= 0 {
			*p.v = *p.d
		}
	}
	for _, p := range []struct{ v, d *int }{{&l.MaxBatch, &d.MaxBatch}, {&l.Workers, &d.Workers}, {&l.MaxPending, &d.MaxPending}, {&l.MaxBacklog, &d.MaxBacklog}} {
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
	// Query is the user's state as its view answers a lookup now, its
	// version raised to at least floor first so that the view's next
	// change is above it (actors.Node.QueryAbove): what a claimed row is
	// checked against, since its dead owner may have published a change it
	// had not written.
	Query      func(ctx context.Context, user string, floor uint64) (*messages.ViewState, error)
	Limits     Limits
	Client     *http.Client // nil: one with Limits.Timeout
	Rand       *rand.Rand   // the back-off's jitter; nil: seeded from the clock
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
	rndMu  sync.Mutex // Rand is not safe for concurrent use

	// writing is held to write changes and hand them to the endpoints, and
	// read-held by a worker that reads its rows from the store: it sees a
	// row either with its changes already in memory or before they are.
	writing sync.RWMutex

	mu     sync.Mutex
	fresh  map[string][]Event // by user, in version order: not yet in the store
	freshN int                // events in fresh
	drops  burst
	kick   chan struct{}

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
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	}
	h := &Hooks{cfg: cfg, fresh: map[string][]Event{}, kick: make(chan struct{}, 1), recheck: map[*endpoint]map[string]store.HookRow{}, started: time.Now()}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.m = newMetrics(cfg.Registerer, cfg.Limits.MaxPending, func() float64 { return float64(h.pendingLen()) })
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

// Changed takes a user's change, to be written to the store within
// FlushEvery and then sent. It never blocks. Over MaxBacklog changes
// waiting (the store slow or down) a user's waiting changes are coalesced
// into this one; beyond MaxPending users waiting a change of one more is
// dropped (both counted).
func (h *Hooks) Changed(ev Event) {
	h.mu.Lock()
	c, ok := h.fresh[ev.User]
	dropped, merged := false, 0
	switch {
	case ok && c[len(c)-1].Version >= ev.Version: // not newer: told already
	case !ok && len(h.fresh) >= h.cfg.Limits.MaxPending:
		dropped = true
	case ok && h.freshN >= h.cfg.Limits.MaxBacklog:
		merged = len(c)
		h.fresh[ev.User] = []Event{ev}
		h.freshN += 1 - len(c)
	default:
		h.fresh[ev.User] = append(c, ev)
		h.freshN++
	}
	full := h.freshN >= h.cfg.Limits.MaxBatch
	h.mu.Unlock()
	if dropped {
		h.m.dropped.Inc()
		h.drops.note(h.cfg.Log, "webhook: changes dropped: too many users waiting for the store", "max_pending", h.cfg.Limits.MaxPending)
	}
	h.coalesced(merged)
	if full {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

// coalesced counts n changes merged before the store, for every endpoint.
func (h *Hooks) coalesced(n int) {
	if n == 0 {
		return
	}
	for _, ep := range h.eps {
		h.m.coalesced.WithLabelValues(ep.label).Add(float64(n))
	}
}

func (h *Hooks) pendingLen() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.freshN
}

// Stop writes what is pending, then stops delivering: what is left in
// memory is in the store, for this node's next start or for the
// survivors.
func (h *Hooks) Stop() {
	h.flush()
	h.cancel()
	h.wg.Wait()
}

// flushLoop writes the pending changes every FlushEvery, or at once when
// MaxBatch wait.
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
// endpoint and user (her latest), then hands every change to each
// endpoint's backlog; on an error they wait for the next flush.
func (h *Hooks) flush() {
	h.mu.Lock()
	fresh := h.fresh
	if len(fresh) == 0 {
		h.mu.Unlock()
		return
	}
	h.fresh, h.freshN = map[string][]Event{}, 0
	h.mu.Unlock()
	chains := make(map[string][]item, len(fresh))
	rows := make([]store.HookRow, 0, len(fresh)*len(h.eps))
	for u, evs := range fresh {
		c := make([]item, len(evs))
		for i, ev := range evs {
			c[i] = itemOf(ev)
		}
		chains[u] = c
		last := c[len(c)-1]
		for _, ep := range h.eps {
			rows = append(rows, store.HookRow{Endpoint: ep.key, User: u, Version: last.Version, Owner: h.cfg.Node, Shard: shardOf(u), AtMs: last.AtMs, Body: last.Body})
		}
	}
	h.writing.Lock()
	defer h.writing.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.Limits.Timeout)
	defer cancel()
	if err := h.cfg.Store.PutHooks(ctx, rows); err != nil {
		h.m.storeErrors.Inc()
		h.drops.note(h.cfg.Log, "webhook: writing changes to the store failed: kept for the next flush", "err", err)
		h.requeue(fresh)
		return
	}
	for _, ep := range h.eps {
		ep.enqueue(chains)
	}
}

func itemOf(ev Event) item {
	body, _ := json.Marshal(ev) // an Event always marshals
	return item{User: ev.User, Version: ev.Version, AtMs: ev.AtMs, Online: ev.Status == "online", Body: body}
}

// requeue puts back the changes a failed flush took, before those that
// came since, within the same bounds as Changed.
func (h *Hooks) requeue(evs map[string][]Event) {
	h.mu.Lock()
	dropped, merged := 0, 0
	for u, old := range evs {
		cur, ok := h.fresh[u]
		if !ok && len(h.fresh) >= h.cfg.Limits.MaxPending {
			dropped += len(old)
			continue
		}
		c := append(old, cur...)
		if h.freshN+len(old) > h.cfg.Limits.MaxBacklog && len(c) > 1 {
			merged += len(c) - 1
			c = c[len(c)-1:]
		}
		h.freshN += len(c) - len(cur)
		h.fresh[u] = c
	}
	h.mu.Unlock()
	h.m.dropped.Add(float64(dropped))
	h.coalesced(merged)
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
	if !b.last.IsZero() && time.Since(b.last) < time.Minute {
		b.mu.Unlock()
		return
	}
	n := b.count
	b.last, b.count = time.Now(), 0
	b.mu.Unlock()
	log.Warn(msg, append(args, "times", n)...)
}
