package store

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StoreMetrics time every store call and count its errors, by operation:
// a slow or failing store delays handshakes (the attempt floor) and loses
// last-seen times.
type StoreMetrics struct {
	Latency *prometheus.HistogramVec // op
	Errors  *prometheus.CounterVec   // op
	// Health, when set, follows the errors as bursts (logged once per
	// burst, presence_store_failing).
	Health *Health
	// Wait, when > 0, bounds each call (a node's: config.Timing's
	// HandshakeWait): a paused store's calls then fail, counted and
	// followed as bursts, instead of hanging those who wait on them. A
	// floor or last seen already queued is still written (Batcher.Do).
	Wait time.Duration
}

// storeOps are the operations of PolicyStore and HistoryStore.
var storeOps = []string{"policy_get", "policy_put", "view_load", "floor", "raise_floor", "take_floor", "last_seen", "set_last_seen"}

// NewStoreMetrics makes the collectors and registers them with reg (nil:
// not registered).
func NewStoreMetrics(reg prometheus.Registerer) *StoreMetrics {
	m := &StoreMetrics{
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "presence_store_seconds",
			Help:    "Policy and history store calls, by operation.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}, []string{"op"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "presence_store_errors_total",
			Help: "Policy and history store calls that failed, by operation.",
		}, []string{"op"}),
	}
	for _, op := range storeOps {
		m.Latency.WithLabelValues(op)
		m.Errors.WithLabelValues(op)
	}
	if reg != nil {
		reg.MustRegister(m.Latency, m.Errors)
	}
	return m
}

// bound is ctx with the call's deadline, Wait.
func (m *StoreMetrics) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if m.Wait <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, m.Wait)
}

func (m *StoreMetrics) observe(op string, start time.Time, err error) {
	m.Latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		m.Errors.WithLabelValues(op).Inc()
	}
	m.Health.note(op, err)
}

// InstrumentPolicies returns p with each call timed and its errors
// counted; a ViewLoader stays one.
func (m *StoreMetrics) InstrumentPolicies(p PolicyStore) PolicyStore {
	if v, ok := p.(ViewLoader); ok {
		return timedViews{timedPolicies{p, m}, v}
	}
	return timedPolicies{p, m}
}

// InstrumentHistory returns h with each call timed and its errors counted.
func (m *StoreMetrics) InstrumentHistory(h HistoryStore) HistoryStore { return timedHistory{h, m} }

type timedPolicies struct {
	PolicyStore
	m *StoreMetrics
}

func (t timedPolicies) Get(ctx context.Context, user string) (PolicyDoc, bool, error) {
	ctx, cancel := t.m.bound(ctx)
	defer cancel()
	start := time.Now()
	doc, ok, err := t.PolicyStore.Get(ctx, user)
	t.m.observe("policy_get", start, err)
	return doc, ok, err
}

func (t timedPolicies) Put(ctx context.Context, user string, doc PolicyDoc) error {
	ctx, cancel := t.m.bound(ctx)
	defer cancel()
	start := time.Now()
	err := t.PolicyStore.Put(ctx, user, doc)
	t.m.observe("policy_put", start, err)
	return err
}

type timedViews struct {
	timedPolicies
	v ViewLoader
}

func (t timedViews) LoadView(ctx context.Context, user string) (PolicyDoc, bool, time.Time, error) {
	ctx, cancel := t.m.bound(ctx)
	defer cancel()
	start := time.Now()
	doc, ok, last, err := t.v.LoadView(ctx, user)
	t.m.observe("view_load", start, err)
	return doc, ok, last, err
}

type timedHistory struct {
	HistoryStore
	m *StoreMetrics
}

func (t timedHistory) Floor(ctx context.Context, user, device string) (uint64, error) {
	ctx, cancel := t.m.bound(ctx)
	defer cancel()
	start := time.Now()
	f, err := t.HistoryStore.Floor(ctx, user, device)
	t.m.observe("floor", start, err)
	return f, err
}

func (t timedHistory) RaiseFloor(ctx context.Context, user, device string, attempt uint64) error {
	ctx, cancel := t.m.bound(ctx)
	defer cancel()
	start := time.Now()
	err := t.HistoryStore.RaiseFloor(ctx, user, device, attempt)
	t.m.observe("raise_floor", start, err)
	return err
}

// TakeFloor is the wrapped store's, timed as take_floor; on a store that
// cannot take a floor, a read and a raise, each timed as itself.
func (t timedHistory) TakeFloor(ctx context.Context, user, device string, attempt uint64) (Taken, error) {
	ft, ok := t.HistoryStore.(FloorTaker)
	if !ok {
		return takeInTwo(ctx, t, user, device, attempt)
	}
	ctx, cancel := t.m.bound(ctx)
	defer cancel()
	start := time.Now()
	res, err := ft.TakeFloor(ctx, user, device, attempt)
	t.m.observe("take_floor", start, err)
	return res, err
}

func (t timedHistory) LastSeen(ctx context.Context, user string) (time.Time, error) {
	ctx, cancel := t.m.bound(ctx)
	defer cancel()
	start := time.Now()
	ls, err := t.HistoryStore.LastSeen(ctx, user)
	t.m.observe("last_seen", start, err)
	return ls, err
}

func (t timedHistory) SetLastSeen(ctx context.Context, user string, at time.Time) error {
	ctx, cancel := t.m.bound(ctx)
	defer cancel()
	start := time.Now()
	err := t.HistoryStore.SetLastSeen(ctx, user, at)
	t.m.observe("set_last_seen", start, err)
	return err
}

// KeepLastSeen hands t to the store's writer (LastSeenKeeper), untimed: it
// does not wait for the store; a store without a writer is timed as
// SetLastSeen.
func (t timedHistory) KeepLastSeen(user string, at time.Time) error {
	if k, ok := t.HistoryStore.(LastSeenKeeper); ok {
		return k.KeepLastSeen(user, at)
	}
	return t.SetLastSeen(context.Background(), user, at)
}
