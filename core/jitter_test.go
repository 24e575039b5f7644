package core_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/presence-im/presence/core"
)

// draws is enough draws for the ranges to be exercised; the sources are
// seeded so every run draws the same numbers.
const draws = 20000

// within reports lo <= d <= hi, allowing 1 ns for float rounding.
func within(d, lo, hi time.Duration) bool { return d >= lo-1 && d <= hi+1 }

func scale(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }

// RenewDelay: the first round is uniform in [0, interval]; later rounds are
// interval x [1-jitter, 1+jitter]; jitter 0 returns the interval.
func TestRenewDelay(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		jitter   float64
		first    bool
		lo, hi   time.Duration
	}{
		{"seed first round", seedRenew, 0.1, true, 0, seedRenew},
		{"seed later rounds", seedRenew, 0.1, false, scale(seedRenew, 0.9), scale(seedRenew, 1.1)},
		{"fast first round", 600 * time.Millisecond, 0.1, true, 0, 600 * time.Millisecond},
		{"fast later rounds", 600 * time.Millisecond, 0.1, false, 540 * time.Millisecond, 660 * time.Millisecond},
		{"wide jitter later rounds", seedRenew, 0.49, false, scale(seedRenew, 0.51), scale(seedRenew, 1.49)},
		{"first round ignores the jitter size", seedRenew, 0.01, true, 0, seedRenew},
		{"jitter 0 first round", seedRenew, 0, true, seedRenew, seedRenew},
		{"jitter 0 later rounds", seedRenew, 0, false, seedRenew, seedRenew},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := core.Rand(1, "conn-"+tc.name)
			minD, maxD := time.Duration(1<<62), time.Duration(-1)
			var sum float64
			for range draws {
				d := core.RenewDelay(r, tc.interval, tc.jitter, tc.first)
				if !within(d, tc.lo, tc.hi) {
					t.Fatalf("RenewDelay = %v, want in [%v, %v]", d, tc.lo, tc.hi)
				}
				minD, maxD = min(minD, d), max(maxD, d)
				sum += float64(d)
			}
			if tc.jitter == 0 {
				if minD != tc.interval || maxD != tc.interval {
					t.Fatalf("jitter 0 gave [%v, %v], want exactly %v", minD, maxD, tc.interval)
				}
				return
			}
			// The draws spread over the whole range, centred.
			span := tc.hi - tc.lo
			if minD > tc.lo+span/50 || maxD < tc.hi-span/50 {
				t.Errorf("draws cover [%v, %v] of [%v, %v]", minD, maxD, tc.lo, tc.hi)
			}
			mean := time.Duration(sum / draws)
			if mid := tc.lo + span/2; mean < mid-span/20 || mean > mid+span/20 {
				t.Errorf("mean %v, want about %v", mean, mid)
			}
		})
	}
}

// E01 6.3: connections opened in the same instant spread their first
// renewals over the whole interval instead of renewing together.
func TestRenewDelayFirstRoundSpreads(t *testing.T) {
	const conns, buckets = 3000, 60
	var hist [buckets]int
	for i := range conns {
		d := core.RenewDelay(core.Rand(7, fmt.Sprintf("conn-%d", i)), seedRenew, 0.1, true)
		hist[min(int(d/(seedRenew/buckets)), buckets-1)]++
	}
	mean := conns / buckets
	for s, n := range hist {
		if n > 2*mean {
			t.Fatalf("second %d has %d first renewals, more than twice the mean %d", s, n, mean)
		}
	}
}

// HeartbeatDelay is in [interval x (1-jitter), interval]: shortened, never
// lengthened.
func TestHeartbeatDelay(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		jitter   float64
	}{
		{"seed", seedHeartbeat, 0.1},
		{"fast", 300 * time.Millisecond, 0.1},
		{"wide", seedHeartbeat, 0.49},
		{"none", seedHeartbeat, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := core.Rand(2, tc.name)
			lo := scale(tc.interval, 1-tc.jitter)
			minD := tc.interval
			for range draws {
				d := core.HeartbeatDelay(r, tc.interval, tc.jitter)
				if !within(d, lo, tc.interval) || d > tc.interval {
					t.Fatalf("HeartbeatDelay = %v, want in [%v, %v]", d, lo, tc.interval)
				}
				minD = min(minD, d)
			}
			if tc.jitter == 0 && minD != tc.interval {
				t.Fatalf("jitter 0 gave %v, want %v", minD, tc.interval)
			}
			if span := tc.interval - lo; tc.jitter > 0 && minD > lo+span/50 {
				t.Errorf("shortest %v, want near %v", minD, lo)
			}
		})
	}
}

// core.Rand(seed, name) is deterministic for the same inputs and differs for
// different names (and seeds).
func TestRand(t *testing.T) {
	seq := func(seed int64, name string) [16]uint64 {
		r := core.Rand(seed, name)
		var out [16]uint64
		for i := range out {
			out[i] = r.Uint64()
		}
		return out
	}
	tests := []struct {
		name       string
		seedA      int64
		nameA      string
		seedB      int64
		nameB      string
		wantEqual  bool
		wantReason string
	}{
		{"same seed and name", 1, "g1/conn-1", 1, "g1/conn-1", true, "deterministic"},
		{"same seed and empty name", 1, "", 1, "", true, "deterministic"},
		{"negative seed", -5, "x", -5, "x", true, "deterministic"},
		{"different names", 1, "g1/conn-1", 1, "g1/conn-2", false, "names differ"},
		{"name vs empty", 1, "a", 1, "", false, "names differ"},
		{"different seeds", 1, "g1/conn-1", 2, "g1/conn-1", false, "seeds differ"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := seq(tc.seedA, tc.nameA), seq(tc.seedB, tc.nameB)
			if (a == b) != tc.wantEqual {
				t.Fatalf("sequences equal = %v, want %v (%s)", a == b, tc.wantEqual, tc.wantReason)
			}
		})
	}

	// Whatever the order in which actors start, each draws the same.
	r1, r2 := core.Rand(9, "a"), core.Rand(9, "b")
	a1, b1 := r1.Float64(), r2.Float64()
	r2, r1 = core.Rand(9, "b"), core.Rand(9, "a")
	if b2, a2 := r2.Float64(), r1.Float64(); a1 != a2 || b1 != b2 {
		t.Fatalf("draws depend on creation order: %v %v vs %v %v", a1, b1, a2, b2)
	}

	// The same source gives the same delays.
	d1 := core.RenewDelay(core.Rand(3, "c"), seedRenew, 0.1, true)
	d2 := core.RenewDelay(core.Rand(3, "c"), seedRenew, 0.1, true)
	if d1 != d2 {
		t.Fatalf("RenewDelay %v then %v from the same seed and name", d1, d2)
	}
}

func TestBackoff(t *testing.T) {
	r := core.Rand(1, "backoff")
	for _, c := range []struct {
		n        int
		low, top time.Duration
	}{{1, 25 * time.Millisecond, 50 * time.Millisecond}, {2, 50 * time.Millisecond, 100 * time.Millisecond},
		{3, 100 * time.Millisecond, 200 * time.Millisecond}, {4, 150 * time.Millisecond, 300 * time.Millisecond},
		{100, 150 * time.Millisecond, 300 * time.Millisecond}} {
		for range draws {
			if d := core.Backoff(r, 50*time.Millisecond, 300*time.Millisecond, c.n); !within(d, c.low, c.top) {
				t.Fatalf("Backoff(50ms, 300ms, %d) = %v, want in [%v, %v]", c.n, d, c.low, c.top)
			}
		}
	}
}
