package memreturn

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestIsQuiet(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name            string
		allocated, live uint64
		elapsed         time.Duration
		percent         int
		want            bool
	}{
		// 19,000 devices heartbeating: 0.92 MB/s for 97 MiB live (bench run, BENCHMARKS.md).
		{"heartbeats", 920_000, 97 * mib, time.Second, 25, true},
		// A connect storm: about 36 MB/s, the live heap growing.
		{"connects", 36_000_000, 40 * mib, time.Second, 25, false},
		// At 25% of 10 MiB, 2.5 MiB a span: 0.25 MiB/s is the edge.
		{"at the edge", mib / 4, 10 * mib, time.Second, 25, true},
		{"just over", mib/4 + 1024, 10 * mib, time.Second, 25, false},
		// The same allocation over a longer look is a lower rate.
		{"over two seconds", mib / 2, 10 * mib, 2 * time.Second, 25, true},
		// A smaller room collects more often for the same allocations.
		{"at 10%", mib / 4, 10 * mib, time.Second, 10, false},
		{"no time", 0, 10 * mib, 0, 25, false},
	} {
		if got := IsQuiet(c.allocated, c.live, c.elapsed, c.percent); got != c.want {
			t.Errorf("%s: IsQuiet(%d, %d, %v, %d) = %v, want %v", c.name, c.allocated, c.live, c.elapsed, c.percent, got, c.want)
		}
	}
}

// The room goes down after QuietLooks quiet looks in a row, not before,
// and back up at the first busy look; the gauge says which.
func TestQuietLowersAfterQuietLooksAndRaisesAtOnce(t *testing.T) {
	const live = 100 << 20
	reg := prometheus.NewRegistry()
	q := NewQuiet(25, 100, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var allocs uint64
	var sets []int
	q.read = func() (uint64, uint64) { return allocs, live }
	q.set = func(p int) int { sets = append(sets, p); return 0 }
	now := time.Unix(0, 0)
	look := func(allocated uint64) bool {
		allocs += allocated
		now = now.Add(time.Second)
		return q.Look(now)
	}
	look(0) // the first look only reads
	quiet := uint64(1 << 20)
	for i := 1; i < QuietLooks; i++ {
		if look(quiet) {
			t.Fatalf("quiet after %d quiet looks, want %d", i, QuietLooks)
		}
	}
	if !look(quiet) || len(sets) != 1 || sets[0] != 25 {
		t.Fatalf("after %d quiet looks: sets %v, want [25]", QuietLooks, sets)
	}
	if g := testutil.ToFloat64(q.gauge); g != 25 {
		t.Fatalf("presence_gc_percent = %v while quiet, want 25", g)
	}
	if look(50 << 20) {
		t.Fatal("quiet after a busy look")
	}
	if len(sets) != 2 || sets[1] != 100 {
		t.Fatalf("after a busy look: sets %v, want [25 100]", sets)
	}
	if g := testutil.ToFloat64(q.gauge); g != 100 {
		t.Fatalf("presence_gc_percent = %v while busy, want 100", g)
	}
	// A busy look in a quiet run starts the count again.
	for i := 1; i < QuietLooks; i++ {
		look(quiet)
	}
	look(50 << 20)
	for i := 1; i < QuietLooks; i++ {
		look(quiet)
	}
	if len(sets) != 2 {
		t.Fatalf("sets %v after interrupted quiet runs, want no change", sets)
	}
}
