package cluster

import (
	"testing"
	"time"
)

// A side must declare dead enough members to be at or below half of the
// cluster: all others when it holds exactly half (without the oldest), and
// never when it holds a majority.
func TestNeedDead(t *testing.T) {
	for _, c := range []struct{ n, side, want int }{
		{3, 1, 2}, {3, 2, 0}, {5, 1, 3}, {5, 2, 3}, {5, 3, 0}, {4, 2, 2}, {9, 1, 5}, {9, 3, 5}, {9, 4, 5}, {9, 5, 0}, {10, 5, 5},
	} {
		if got := needDead(c.n, c.side); got != c.want {
			t.Errorf("needDead(%d, %d) = %d, want %d", c.n, c.side, got, c.want)
		}
	}
}

// The fast preset (probes every 200 ms, one indirect check, awareness up
// to 8, suspicion 2 x log10(n) probe intervals with no confirmation
// expected): the minority's decision, worked out by hand per size, grows
// with the members it must declare dead, each probe slower than the last.
func TestMinorityDetectionFast(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		n, side int
		want    time.Duration
	}{
		// phase 200 + own side 2 x (side-1) x 200 + failed probes + suspicion 400 + tick 100
		{3, 1, (200 + 0 + (200 + 400) + 400 + 100) * ms},
		{5, 2, (200 + 400 + (200 + 400 + 600) + 400 + 100) * ms},
		{9, 1, (200 + 0 + (200 + 400 + 600 + 800 + 1000) + 400 + 100) * ms},
		{9, 4, (200 + 1200 + (200 + 400 + 600 + 800 + 1000) + 400 + 100) * ms},
		// awareness stops at 8 x: the 9th and later failed probes take 1.6 s
		{17, 1, (200 + 0 + (200 * (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 8)) + 492 + 100) * ms},
		{9, 5, FenceTick}, // a majority never fences
	} {
		if got := MinorityDetection("fast", c.n, c.side).Round(ms); got != c.want {
			t.Errorf("MinorityDetection(fast, %d, %d) = %v, want %v", c.n, c.side, got, c.want)
		}
	}
}

// The seed preset (memberlist's LAN profile: 1 s probes, three indirect
// checks, suspicion 4 x log10(n) s, six times that without the
// confirmations it expects from more than three members).
func TestMinorityDetectionSeed(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		n, side int
		want    time.Duration
	}{
		{3, 1, 1*s + (1+2)*s + 4*s + FenceTick},              // one other to nack: +1 a probe; no confirmation expected of 3
		{9, 1, 1*s + (1+4+7+8+8)*s + 24*s + FenceTick},       // +3 a probe, up to 8 x
		{9, 4, 1*s + 6*s + (1+4+7+8+8)*s + 24*s + FenceTick}, // three of its side first, twice
	} {
		if got := MinorityDetection("seed", c.n, c.side); got != c.want {
			t.Errorf("MinorityDetection(seed, %d, %d) = %v, want %v", c.n, c.side, got, c.want)
		}
	}
}

// A device of a fenced side is closed at the latest its decision, both
// goodbyes and the drain spread after the cut; the lease strategy adds the
// ask's delay and twice the arbiter's TTL.
func TestFenceClose(t *testing.T) {
	spread := 2 * time.Second
	if got, want := FenceClose("fast", 9, 1, false, spread), MinorityDetection("fast", 9, 1)+2*time.Second+spread; got != want {
		t.Fatalf("FenceClose(fast, 9, 1) = %v, want %v", got, want)
	}
	lease := Propagation("fast") + FenceTick + 2*FailureDetection("fast", 3)
	if got, want := FenceClose("fast", 9, 4, true, spread), FenceClose("fast", 9, 4, false, spread)+lease; got != want {
		t.Fatalf("FenceClose(fast, 9, 4, lease) = %v, want %v", got, want)
	}
	if WorstMinority(9) != 4 || WorstMinority(10) != 5 || WorstMinority(3) != 1 {
		t.Fatal("the worst minority is the largest side without a majority")
	}
}

// Join convergence: a propagation and one push/pull, whose interval
// memberlist scales above 32 members.
func TestConvergence(t *testing.T) {
	for _, c := range []struct {
		preset string
		n      int
		want   time.Duration
	}{
		{"fast", 3, 600*time.Millisecond + time.Second},
		{"fast", 9, 600*time.Millisecond + time.Second},
		{"fast", 33, 600*time.Millisecond + 2*time.Second},
		{"fast", 100, 600*time.Millisecond + 3*time.Second},
		{"seed", 9, 2500*time.Millisecond + 30*time.Second},
	} {
		if got := Convergence(c.preset, c.n); got != c.want {
			t.Errorf("Convergence(%s, %d) = %v, want %v", c.preset, c.n, got, c.want)
		}
	}
}

// A fenced incarnation tries again after 1 s, 2 s, 4 s, ... at most 15 s.
func TestRejoinWait(t *testing.T) {
	s := time.Second
	for _, c := range []struct{ after, want time.Duration }{
		{0, s}, {999 * time.Millisecond, s}, {s, 2 * s}, {3 * s, 4 * s}, {6 * s, 4 * s}, {7 * s, 8 * s}, {15 * s, 15 * s}, {time.Hour, 15 * s},
	} {
		if got := RejoinWait(c.after); got != c.want {
			t.Errorf("RejoinWait(%v) = %v, want %v", c.after, got, c.want)
		}
	}
	if got, want := HealConvergence("fast", 9, 3*s), 4*s+Convergence("fast", 9); got != want {
		t.Fatalf("HealConvergence = %v, want %v", got, want)
	}
}

// The resolver keeps a dead member in its quorum base for StableAfter: a
// side cut off must still count the first member it declared dead when it
// declares the last it needs, or it would decide on a smaller base. That
// holds up to nine members with either preset; not beyond ten with the
// fast one (docs/bounds.md "The cluster's size").
func TestStableCoversTheMinorityVerdicts(t *testing.T) {
	for _, preset := range []string{"fast", "seed"} {
		for n := 3; n <= 9; n++ {
			c := profile(preset)
			side := WorstMinority(n)
			// from the first verdict to the last: the minority's decision less
			// the phase, the first probe and the suspicion before the first
			spread := MinorityDetection(preset, n, side) - 2*c.ProbeInterval - suspicionAlone(preset, n)
			if stable := StableAfter(preset, n); spread >= stable {
				t.Errorf("%s, %d members: verdicts over %v, stable %v", preset, n, spread, stable)
			}
		}
	}
}
