package memreturn

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/presence-im/presence/internal/metric"
	"github.com/prometheus/client_golang/prometheus"
)

// The collector's room can follow what the node does. Go collects when
// the heap has grown by GOGC percent of what the last collection kept live
// (100: twice the live heap), and that room is resident: with 19,000
// devices heartbeating the heap holds about 3.5 KiB per device over 5.0
// KiB of live state, about 1 KiB of it the room, the rest fragmentation
// a connect storm left. A smaller room costs CPU in proportion to what
// the node allocates, not to what it holds: a connect storm, which
// allocates about 12 KB per device, paid 15 to 40% more CPU per connect
// at GOGC=50 and 25 (BENCHMARKS.md, RSS), heartbeats, about 240 B each, a
// few percent. So a
// Quiet keeps the process's GOGC while the node allocates much for its
// live heap and lowers it to Percent while it allocates little. Its
// collections come more often at rest, and a lookup that meets one is
// slower: the node runs it only with --gc-quiet (docs/operations.md,
// "Memory").

// QuietSpan is what quiet means: at the quiet room, collections would come
// at most once per QuietSpan for what the node allocates now.
const QuietSpan = 10 * time.Second

// QuietLooks is how many quiet looks in a row lower the room; one busy look
// raises it again.
const QuietLooks = 5

// Quiet sets GOGC from how much the node allocates for its live heap.
type Quiet struct {
	Percent int // GOGC while quiet
	Base    int // GOGC otherwise: the process's (Go's default 100)

	gauge   prometheus.Gauge
	log     *slog.Logger
	read    func() (allocs, live uint64) // /gc/heap/allocs and /gc/heap/live
	set     func(int) int                // debug.SetGCPercent
	allocs  uint64
	at      time.Time
	quietly int // quiet looks in a row
	quiet   bool
}

// NewQuiet makes a Quiet lowering GOGC to percent while the node is quiet;
// its gauge (presence_gc_percent) goes to reg. The room starts at base.
func NewQuiet(percent, base int, reg prometheus.Registerer, log *slog.Logger) *Quiet {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}}
	q := &Quiet{
		Percent: percent, Base: base, log: log,
		gauge: metric.Gauge("presence_gc_percent", "The collector's room (GOGC) now: the process's while the node allocates much for its live heap, --gc-quiet while it allocates little."),
		read: func() (uint64, uint64) {
			metrics.Read(samples)
			return samples[0].Value.Uint64(), samples[1].Value.Uint64()
		},
		set: debug.SetGCPercent,
	}
	reg.MustRegister(q.gauge)
	q.gauge.Set(float64(base))
	return q
}

// IsQuiet says whether allocating allocated over elapsed, with live bytes
// live, is quiet: at percent, collections would come at most once per
// QuietSpan.
func IsQuiet(allocated, live uint64, elapsed time.Duration, percent int) bool {
	if elapsed <= 0 {
		return false
	}
	perSpan := float64(allocated) * float64(QuietSpan) / float64(elapsed)
	return perSpan <= float64(live)*float64(percent)/100
}

// Look reads what the node allocated since the last look and sets the
// room: Percent after QuietLooks quiet looks in a row, Base at the first
// busy one. It tells whether the room is the quiet one.
func (q *Quiet) Look(now time.Time) bool {
	allocs, live := q.read()
	allocated, elapsed := allocs-q.allocs, now.Sub(q.at)
	first := q.at.IsZero()
	q.allocs, q.at = allocs, now
	if first {
		return q.quiet
	}
	if !IsQuiet(allocated, live, elapsed, q.Percent) {
		q.quietly = 0
		if q.quiet {
			q.quiet = false
			q.room(q.Base, "busy", allocated, live, elapsed)
		}
		return false
	}
	if q.quietly++; !q.quiet && q.quietly >= QuietLooks {
		q.quiet = true
		q.room(q.Percent, "quiet", allocated, live, elapsed)
	}
	return q.quiet
}

func (q *Quiet) room(percent int, why string, allocated, live uint64, elapsed time.Duration) {
	q.set(percent)
	q.gauge.Set(float64(percent))
	q.log.Debug("collector's room", "gogc", percent, "node", why, "allocated", allocated, "over", elapsed, "live", live)
}

// Run looks every period until ctx ends, then gives the process its GOGC
// back.
func (q *Quiet) Run(ctx context.Context, every time.Duration) {
	q.Look(time.Now())
	tick(ctx, every, func(now time.Time) { q.Look(now) })
	if q.quiet {
		q.set(q.Base)
	}
}
