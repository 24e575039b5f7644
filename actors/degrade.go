package actors

import (
	"sync/atomic"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/internal/metric"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus"
)

// degradeTick is how often a node reads its fan-out backlog.
const degradeTick = 100 * time.Millisecond

// degradeWatch reads the node's fan-out backlog every tick and degrades
// or restores the batched subscriptions of every connection it serves
// (core.Degrader decides).
type degradeWatch struct {
	n        *Node
	d        core.Degrader
	pull     time.Duration
	degraded atomic.Bool  // read by a connection subscribing, under its sink's lock
	since    atomic.Int64 // when degraded (Unix ms); 0: pushing
	done     chan struct{}
	ended    chan struct{}
}

// startDegradeWatch runs the watch unless degradation is off (At 0).
func startDegradeWatch(n *Node, c config.Degrade) *degradeWatch {
	w := &degradeWatch{n: n, d: core.Degrader{At: c.At, Below: c.Below, RestoreAfter: c.RestoreAfter}, pull: c.Pull,
		done: make(chan struct{}), ended: make(chan struct{})}
	if c.At <= 0 {
		close(w.ended)
		return w
	}
	go w.run()
	return w
}

// sinceMs is when the node was degraded (Unix ms); 0: pushing.
func (w *degradeWatch) sinceMs() int64 {
	if w == nil {
		return 0
	}
	return w.since.Load()
}

func (w *degradeWatch) stop() {
	if w == nil {
		return
	}
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	<-w.ended
}

func (w *degradeWatch) run() {
	defer close(w.ended)
	t := time.NewTicker(degradeTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-w.done:
			return
		case now := <-t.C:
			w.read(now, now.Sub(last))
			last = now
		}
	}
}

// read takes one reading and acts on what the Degrader decides.
func (w *degradeWatch) read(now time.Time, since time.Duration) {
	m := w.n.metrics
	backlog := w.n.hub.backlog(now)
	m.FanoutBacklog.Set(backlog.Seconds())
	if w.d.Degraded {
		m.DegradedSeconds.Add(since.Seconds())
	}
	switch w.d.Observe(backlog, now) {
	case core.Degrade:
		w.degraded.Store(true)
		w.since.Store(now.UnixMilli())
		m.Degraded.Set(1)
		n := w.n.hub.each(func(o *connOut) []*messages.Frame {
			if ts := o.sink.Degrade(); len(ts) > 0 {
				return []*messages.Frame{degradedFrame(w.pull, ts)}
			}
			return nil
		})
		m.DegradedConnections.Add(float64(n))
		log := w.n.log.Info // nothing to degrade: worth a line, not a warning
		if n > 0 {
			log = w.n.log.Warn
		}
		log("push behind: batched subscriptions degraded to pull", "backlog", backlog, "at", w.d.At, "connections", n)
	case core.Restore:
		w.degraded.Store(false) // before the walk: a subscribe after it sees push
		w.since.Store(0)
		m.Degraded.Set(0)
		n := w.n.hub.each(func(o *connOut) []*messages.Frame { return o.sink.Restore() })
		w.n.log.Info("push caught up: batched subscriptions pushed again", "degraded_for", now.Sub(w.d.Since).Round(time.Millisecond), "connections", n)
	}
}

func degradedFrame(pull time.Duration, targets []string) *messages.Frame {
	return &messages.Frame{Kind: &messages.Frame_Degraded{Degraded: &messages.Degraded{RetryAfterMs: uint32(pull.Milliseconds()), Targets: targets}}}
}

// degradeNewLocked degrades a batched subscribe taken while the node is
// degraded: the connection is told to pull its new targets too; o.mu
// held (so that a restore walking the connections comes after it).
func (a *connActor) degradeNewLocked(targets []string) *messages.Frame {
	w := a.env.degrade
	if w == nil || !w.degraded.Load() {
		return nil
	}
	if ts := a.out.sink.Degrade(); ts != nil { // its first batched targets
		a.env.metrics.DegradedConnections.Inc()
		return degradedFrame(w.pull, ts)
	}
	return degradedFrame(w.pull, targets)
}

// each runs f on every connection of the hub under its lock and sends
// what f returns; it returns the connections sent something. A connection
// whose outbox is full is ended as an overflow.
func (h *sinkHub) each(f func(*connOut) []*messages.Frame) int {
	n := 0
	for _, o := range h.all() {
		o.mu.Lock()
		var ok = true
		if !o.closed {
			if frames := f(o); len(frames) > 0 {
				n++
				ok = o.sendLocked(frames)
			}
		}
		self := o.self
		o.mu.Unlock()
		if !ok && h.overflow != nil {
			h.overflow(self)
		}
	}
	return n
}

// backlog is the push backlog now: the longest event written since the
// last reading (or how late a graceful close's offline was published past
// its debounce: the actors upstream of the fan-out behind), or the age of
// the oldest event not yet written.
func (h *sinkHub) backlog(now time.Time) time.Duration {
	b := time.Duration(h.longest.Swap(0))
	for i := range h.shards {
		s := &h.shards[i]
		if cur := s.cur.Load(); cur != 0 {
			b = max(b, now.Sub(time.Unix(0, cur)))
			continue
		}
		s.mu.Lock()
		if len(s.jobs) > 0 {
			b = max(b, now.Sub(s.jobs[0].ev.start))
		}
		s.mu.Unlock()
	}
	return b
}

// took records one event's fan-out time for the next reading.
func (h *sinkHub) took(d time.Duration) {
	for {
		old := h.longest.Load()
		if int64(d) <= old || h.longest.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// degradeMetrics count degraded mode.
type degradeMetrics struct {
	Degraded            prometheus.Gauge   // 1 while degraded
	DegradedSeconds     prometheus.Counter // time spent degraded
	DegradedConnections prometheus.Counter // connections told to pull
	FanoutBacklog       prometheus.Gauge   // the last reading
}

func newDegradeMetrics() degradeMetrics {
	return degradeMetrics{
		Degraded:            metric.Gauge("presence_degraded", "1 while this node's batched subscriptions are degraded to pull (its fan-out backlog reached --degrade-at)."),
		DegradedSeconds:     metric.Counter("presence_degraded_seconds_total", "Time this node spent in degraded mode."),
		DegradedConnections: metric.Counter("presence_degraded_connections_total", "Connections told to pull their batched targets (a degraded frame)."),
		FanoutBacklog:       metric.Gauge("presence_fanout_backlog_seconds", "The push backlog at the last reading (every 100 ms): the longest event written since the reading before, or how late a graceful close's offline was published past the debounce, or the oldest event not yet written."),
	}
}

func (m degradeMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Degraded, m.DegradedSeconds, m.DegradedConnections, m.FanoutBacklog}
}
