package store

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// healthSummary is how often a burst of failures that goes on is summed
// up in the log.
const healthSummary = time.Minute

// Health follows the store's failures by operation as bursts, so that a
// store gone away is a few log lines, not one per handshake: the first
// failure of a burst is logged at once with its error, the failures after
// it are counted and summed up once a healthSummary while it lasts, and its
// end (the operation's next success) is logged with the count and how long
// it lasted. presence_store_failing{op} is 1 during a burst. A success ends
// the bursts of every operation of its kind (reads, writes): an operation
// seldom called (a floor is read when a lease actor starts) would
// otherwise say the store is failing long after it came back, while a
// read-only disk still shows its writes failing. Safe for concurrent use.
type Health struct {
	log     *slog.Logger
	failing *prometheus.GaugeVec // op

	mu     sync.Mutex
	bursts map[string]*burst
}

// burst is one operation's failures since its last success.
type burst struct {
	since, logged time.Time
	failures      int // all of the burst
	unlogged      int // since the last line
}

// NewHealth logs to log (nil: discarded) and registers its gauge with reg
// (nil: not registered).
func NewHealth(log *slog.Logger, reg prometheus.Registerer) *Health {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Health{log: log, bursts: map[string]*burst{}, failing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "presence_store_failing",
		Help: "1 while the store's latest calls of an operation fail (a burst: logged at its start, once a minute and at its end).",
	}, []string{"op"})}
	for _, op := range storeOps {
		h.failing.WithLabelValues(op)
	}
	if reg != nil {
		reg.MustRegister(h.failing)
	}
	return h
}

// Failing reports whether any operation is in a burst of failures.
func (h *Health) Failing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bursts) > 0
}

// FailingOps are the operations in a burst of failures, sorted (nil: none
// or no Health).
func (h *Health) FailingOps() []string {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var ops []string
	for op := range h.bursts {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	return ops
}

// FailingOps are the operations of s failing now when s is a store timed
// by StoreMetrics with a Health (Health.FailingOps), else nil.
func FailingOps(s any) []string {
	switch t := s.(type) {
	case timedHistory:
		return t.m.Health.FailingOps()
	case timedPolicies:
		return t.m.Health.FailingOps()
	case timedViews:
		return t.m.Health.FailingOps()
	}
	return nil
}

// note records the outcome of one call of op.
func (h *Health) note(op string, err error) {
	if h == nil {
		return
	}
	now := time.Now()
	if err == nil {
		for _, o := range storeOps {
			if o == op || writeOps[o] == writeOps[op] {
				h.ended(o, now)
			}
		}
		return
	}
	h.mu.Lock()
	b := h.bursts[op]
	switch {
	case b == nil:
		h.bursts[op] = &burst{since: now, logged: now, failures: 1}
		h.mu.Unlock()
		h.failing.WithLabelValues(op).Set(1)
		h.log.Error("store: "+op+" failing (logged again once a minute while it lasts, and when it ends)", "err", err)
	default:
		b.failures++
		b.unlogged++
		if now.Sub(b.logged) < healthSummary {
			h.mu.Unlock()
			return
		}
		n := b.unlogged
		b.logged, b.unlogged = now, 0
		h.mu.Unlock()
		h.log.Error("store: "+op+" still failing", "failures", n, "since", now.Sub(b.since).Round(time.Second), "err", err)
	}
}

// writeOps are the operations that write; the others read.
var writeOps = map[string]bool{"policy_put": true, "raise_floor": true, "take_floor": true, "set_last_seen": true}

// ended ends op's burst, if any: the store answered.
func (h *Health) ended(op string, now time.Time) {
	h.mu.Lock()
	b := h.bursts[op]
	if b == nil {
		h.mu.Unlock()
		return
	}
	delete(h.bursts, op)
	h.mu.Unlock()
	h.failing.WithLabelValues(op).Set(0)
	h.log.Info("store: "+op+" works again", "failures", b.failures, "lasted", now.Sub(b.since).Round(time.Millisecond))
}
