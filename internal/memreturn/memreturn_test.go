package memreturn

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWorth(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		name string
		s    State
		want bool
	}{
		{"quiet after a peak", State{Free: 20 * mb, Objects: 12 * mb, Live: 10 * mb, Allocs: mb, Collected: true}, true},
		{"garbage not yet collected counts", State{Free: 0, Objects: 30 * mb, Live: 10 * mb, Allocs: mb, Collected: true}, true},
		{"busy: allocates more than the excess", State{Free: 20 * mb, Objects: 12 * mb, Live: 10 * mb, Allocs: 40 * mb, Collected: true}, false},
		{"no collection since the last return", State{Free: 20 * mb, Objects: 12 * mb, Live: 10 * mb, Allocs: mb}, false},
		{"under MinExcess", State{Free: 3 * mb, Objects: 2 * mb, Live: 2 * mb, Collected: true}, false},
		{"under ExcessShare of a large heap", State{Free: 10 * mb, Objects: 1000 * mb, Live: 1000 * mb, Allocs: mb, Collected: true}, false},
		{"live above the heap (read between a collection and its sweep)", State{Free: 0, Objects: 5 * mb, Live: 10 * mb, Collected: true}, false},
	} {
		if got := Worth(c.s); got != c.want {
			t.Errorf("%s: Worth(%+v) (excess %d) = %v, want %v", c.name, c.s, c.s.Excess(), got, c.want)
		}
	}
}

func released() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A peak of 64 MiB written (resident) and dropped while 64 MiB stay live
// (so the heap goal covers the peak and the runtime's scavenger keeps its
// pages): a look gives them back, counts the return and its bytes; the next
// look, with no collection since, does nothing, nor one after a collection
// that freed nothing.
func TestLookGivesBackAPeak(t *testing.T) {
	live := make([]byte, 64<<20)
	peak := make([][]byte, 64)
	for i := range peak {
		peak[i] = make([]byte, 1<<20)
		for j := 0; j < len(peak[i]); j += 4096 {
			peak[i][j] = 1 // every page written: resident
		}
	}
	peak = nil
	runtime.GC()
	reg := prometheus.NewRegistry()
	r := New(reg, slog.New(slog.DiscardHandler))
	before := released()
	n := r.Look()
	if n < 48<<20 || released()-before < 48<<20 {
		t.Fatalf("look returned %d bytes, released grew by %d: want at least 48 MiB of the 64 MiB peak", n, released()-before)
	}
	if got := testutil.ToFloat64(r.returns); got != 1 {
		t.Fatalf("presence_memory_returns_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(r.returned); got != float64(n) {
		t.Fatalf("presence_memory_returned_bytes_total = %v, want %d", got, n)
	}
	if n := r.Look(); n != 0 {
		t.Fatalf("a look with no collection since the return returned %d bytes", n)
	}
	runtime.GC()
	if n := r.Look(); n != 0 {
		t.Fatalf("a look after a collection that freed nothing returned %d bytes", n)
	}
	runtime.KeepAlive(live)
}

// Run looks until its context ends, and not at all with a period of 0.
func TestRunEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
		ctx, cancel := context.WithCancel(t.Context())
		r.Run(ctx, 0) // returns at once
		done := make(chan struct{})
		go func() { r.Run(ctx, time.Second); close(done) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Run ended before its context")
		default:
		}
		cancel()
		<-done
	})
}
