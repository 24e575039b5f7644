// Package memreturn gives the heap's free pages back to the system once a
// node has gone quiet after a peak (docs/architecture.md, "Memory").
//
// The Go runtime keeps the pages a collection freed, to reuse them: its
// background scavenger returns only what exceeds the heap goal (twice the
// live heap at GOGC=100) plus 10%, or what exceeds GOMEMLIMIT. After a
// burst (a device subscribing to thousands of users, an admin batch, a
// wave of devices leaving and their actors passivating) the live heap is
// back where it was, but the pages the burst's garbage filled stay
// resident: RSS stays at the burst's height until the next burst reuses
// them. A Returner looks every period and, when the heap holds much more
// than its live objects (free pages, garbage) and the node will not use it
// before the next look, calls debug.FreeOSMemory, which collects and
// returns every free page.
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

// MinExcess is the excess below which nothing is returned: a collection
// for less is not worth its CPU.
const MinExcess = 4 << 20

// ExcessShare is the least excess, as a share of the live heap, worth a
// return: above the 10% the runtime's scavenger leaves by itself.
const ExcessShare = 0.125

// State is what a look reads of the runtime, in bytes.
type State struct {
	Free    uint64 // heap pages free and still resident (/memory/classes/heap/free)
	Objects uint64 // heap objects, garbage not yet swept included (/memory/classes/heap/objects)
	Live    uint64 // live heap at the last collection (/gc/heap/live)
	Allocs  uint64 // allocated since the previous look (/gc/heap/allocs)
	// Collected: a collection ran since the last return (or there was
	// none yet), the return's own aside.
	Collected bool
}

// Excess is what the heap holds beyond its live objects: free pages still
// resident and garbage not yet collected.
func (s State) Excess() uint64 {
	if s.Objects+s.Free < s.Live {
		return 0
	}
	return s.Objects + s.Free - s.Live
}

// Worth says whether a return pays: the excess is over MinExcess and
// ExcessShare of the live heap; the node allocated less since the last
// look than the excess, so it would not reuse those pages before the next
// look (a busy node allocates more: its free pages are the room of its
// next collection cycle, and it keeps them); and a collection other than
// the return's own ran since the last return, so that returns at most
// double the collections of a node that keeps allocating a little, and
// never run back to back for what a return could not give back.
func Worth(s State) bool {
	e := s.Excess()
	return s.Collected && e >= MinExcess && float64(e) >= ExcessShare*float64(s.Live) && s.Allocs < e
}

// Returner returns free heap pages to the system when Worth says so.
type Returner struct {
	returns  prometheus.Counter
	returned prometheus.Counter
	log      *slog.Logger
	samples  []metrics.Sample
	allocs   uint64 // /gc/heap/allocs at the previous look
	cycles   uint64 // /gc/cycles/total right after the last return (0: none yet)
}

// New makes a Returner; its metrics go to reg.
func New(reg prometheus.Registerer, log *slog.Logger) *Returner {
	r := &Returner{
		returns:  metric.Counter("presence_memory_returns_total", "Free heap pages given back to the system after a peak (debug.FreeOSMemory)."),
		returned: metric.Counter("presence_memory_returned_bytes_total", "Bytes of heap the returns gave back to the system."),
		log:      log,
		samples: []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/objects:bytes"},
			{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"},
			{Name: "/memory/classes/heap/released:bytes"}},
	}
	reg.MustRegister(r.returns, r.returned)
	s, _, _ := r.read()
	r.allocs = s.Allocs
	return r
}

// read takes the runtime's figures: the state (Allocs since the start),
// the collections so far and the heap already returned.
func (r *Returner) read() (s State, cycles, released uint64) {
	metrics.Read(r.samples)
	v := func(i int) uint64 {
		if r.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return r.samples[i].Value.Uint64()
	}
	return State{Free: v(0), Objects: v(1), Live: v(2), Allocs: v(3)}, v(4), v(5)
}

// Look reads the runtime and returns the free pages if Worth says so; it
// tells how many bytes went back (0: none).
func (r *Returner) Look() uint64 {
	s, cycles, before := r.read()
	s.Allocs, r.allocs = s.Allocs-r.allocs, s.Allocs
	s.Collected = r.cycles == 0 || cycles > r.cycles
	if !Worth(s) {
		return 0
	}
	debug.FreeOSMemory()
	s2, cycles, after := r.read()
	r.cycles, r.allocs = cycles, s2.Allocs // the return's own allocations are not the node's
	var n uint64
	if after > before {
		n = after - before
	}
	r.returns.Inc()
	r.returned.Add(float64(n))
	r.log.Debug("memory returned", "bytes", n, "free", s.Free, "objects", s.Objects, "live", s.Live, "allocated", s.Allocs)
	return n
}

// Run looks every period until ctx ends; a period of 0 never looks.
func (r *Returner) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		return
	}
	tick(ctx, every, func(time.Time) { r.Look() })
}

// tick calls look every period until ctx ends.
func tick(ctx context.Context, every time.Duration, look func(now time.Time)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			look(now)
		}
	}
}
