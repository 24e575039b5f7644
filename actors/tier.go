package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/internal/metric"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus"
)

type (
	// connQuery is a query frame, its targets checked by the sink.
	connQuery struct {
		requestID string
		targets   []string
	}
	// batchFlush is a connection's batch window ending.
	batchFlush struct{}
)

// batchOut is a connection's batched tier beside its sink: the flush
// timer, armed by whoever puts the first change of a window into the sink
// (the actor or a fan-out worker), always under connOut.mu. Made at the
// first batched subscribe: most connections have none.
type batchOut struct {
	t      timer
	armed  bool
	sched  *timers
	self   *actor.PID
	window time.Duration
}

// armLocked arms the window's flush once the sink holds a batched change;
// o.mu held.
func (o *connOut) armLocked() {
	if b := o.batch; b != nil && !b.armed && !o.closed && o.sink.Due() > 0 {
		b.armed = true
		b.t.arm(b.sched, b.window, b.self, batchFlush{})
	}
}

// stopBatchLocked stops the flush of an ended connection; o.mu held.
func (o *connOut) stopBatchLocked() {
	if o.batch != nil {
		o.batch.t.stop()
		o.batch.armed = false
	}
}

// onBatchFlush sends the window's merged changes in one presence_batch.
func (a *connActor) onBatchFlush(ctx actor.Context) {
	a.out.mu.Lock()
	if a.out.batch == nil || a.out.closed {
		a.out.mu.Unlock()
		return
	}
	a.out.batch.armed = false
	due := a.out.sink.Due()
	frames := a.out.sink.Flush()
	ok := a.out.sendLocked(frames)
	a.out.mu.Unlock()
	sent := 0
	for _, f := range frames {
		sent += len(f.GetPresenceBatch().GetPresences())
	}
	if sent > 0 {
		a.env.metrics.BatchPresences.Observe(float64(sent))
		a.env.metrics.FanoutFrames.WithLabelValues("batched").Add(float64(len(frames)))
	}
	a.env.metrics.BatchUnchanged.Add(float64(due - sent))
	if !ok {
		a.overflow(ctx)
	}
}

// batchedLocked readies the connection's batched tier; o.mu held.
func (a *connActor) batchedLocked(self *actor.PID) {
	if a.out.batch == nil {
		a.out.batch = &batchOut{sched: a.env.sched, self: self, window: a.env.timing.BatchWindow}
	}
}

// query asks each target's view for what the device may see, registering
// nothing; a bad query (400) or one over core.MaxQueriesPending (429) is
// answered with an error frame and changes nothing.
func (a *connActor) query(ctx actor.Context, m connQuery) {
	a.out.mu.Lock()
	targets, err := a.out.sink.Query(m.requestID, m.targets)
	a.out.mu.Unlock()
	if err != nil {
		a.refuse(ctx, m.requestID, err, core.ErrQueriesPending, messages.ErrSlowDown, LimitQueriesPending)
		return
	}
	a.env.metrics.QueryTargets.Add(float64(len(targets)))
	for _, target := range targets {
		a.env.post.send(KindView, target, &messages.ViewSubscribe{Target: target, Viewer: a.user, Sink: refOf(ctx.Self()), RequestId: m.requestID, Query: true})
	}
}

// tierMetrics count the batched tier, the queries, what the fan-out
// writes and what lookups answer (seed 004 §4.4: the amplification and
// the empty-answer rate).
type tierMetrics struct {
	BatchPresences prometheus.Histogram   // presences per presence_batch frame
	BatchUnchanged prometheus.Counter     // batched targets whose window ended where it began
	QueryTargets   prometheus.Counter     // targets asked by queries
	FanoutFrames   *prometheus.CounterVec // tier: presence frames (realtime) and presence_batch frames written
	Lookups        *prometheus.CounterVec // answer: online, offline, unknown
	Changes        *prometheus.CounterVec // kind: status (online/offline), state (the rest)
}

// The kinds of presence_changes_total.
const (
	ChangeStatus = "status" // online/offline
	ChangeState  = "state"  // show, status text, activity, devices, a re-trim
)

// The answers of presence_lookups_total.
const (
	AnswerOnline  = "online"
	AnswerOffline = "offline"
	AnswerUnknown = "unknown" // 503: settling, or no answer in time
)

// CountLookup counts one admin lookup's answer.
func (m *Metrics) CountLookup(st *messages.ViewState, err error) {
	switch {
	case err != nil:
		m.Lookups.WithLabelValues(AnswerUnknown).Inc()
	case st.GetOnline():
		m.Lookups.WithLabelValues(AnswerOnline).Inc()
	default:
		m.Lookups.WithLabelValues(AnswerOffline).Inc()
	}
}

func newTierMetrics() tierMetrics {
	return tierMetrics{
		BatchPresences: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "presence_batch_presences", Help: "Presences per presence_batch frame (a batched tier's window of merged changes).",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
		}),
		BatchUnchanged: metric.Counter("presence_batch_unchanged_total", "Batched targets that changed in a window and ended it as the device had them (a flap merged away): nothing sent."),
		QueryTargets:   metric.Counter("presence_query_targets_total", "Targets asked by query frames (each one view answer, nothing subscribed)."),
		FanoutFrames:   metric.CounterVec("presence_fanout_frames_total", "Change frames written to subscribers' sockets, by tier: realtime (a presence frame each) and batched (a presence_batch frame each).", "tier"),
		Lookups:        metric.CounterVec("presence_lookups_total", "Admin lookups (GET /api/presence, /api/route, the batch) by answer: online, offline, unknown (503). offline and unknown over all: the empty-answer rate.", "answer"),
		Changes:        metric.CounterVec("presence_changes_total", "Changes views published to their subscribers, a new version each, by kind: status (online/offline) and state (show, status text, activity, devices, a re-trim). The denominator of the fan-out amplification.", "kind"),
	}
}

func (m tierMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.BatchPresences, m.BatchUnchanged, m.QueryTargets, m.FanoutFrames, m.Lookups, m.Changes}
}

// presetTier makes the series of the tier metrics from the start.
func (m tierMetrics) presetTier() {
	for _, t := range []string{"realtime", "batched"} {
		m.FanoutFrames.WithLabelValues(t)
	}
	for _, a := range []string{AnswerOnline, AnswerOffline, AnswerUnknown} {
		m.Lookups.WithLabelValues(a)
	}
	for _, k := range []string{ChangeStatus, ChangeState} {
		m.Changes.WithLabelValues(k)
	}
}
