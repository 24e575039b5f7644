package core_test

import (
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// Seed 002 §4.3: three heartbeats in a row whose seq is out of order or
// whose client time goes backwards trip the fuse; a client restart (seq
// back to 1 once, then growing) never does.
func TestBeatsDriftFuse(t *testing.T) {
	type beat struct {
		seq uint64
		ts  int64
	}
	tests := []struct {
		name    string
		beats   []beat
		tripAt  int // index of the beat that trips (-1: none)
		cause   string
		before  core.BeatMark
		after   core.BeatMark
		restart int // restarts counted
	}{
		{"growing", []beat{{1, 100}, {2, 200}, {3, 300}, {4, 400}}, -1, "", core.BeatMark{}, core.BeatMark{}, 0},
		{"a client restart", []beat{{10, 100}, {11, 200}, {1, 300}, {2, 400}, {3, 500}}, -1, "", core.BeatMark{}, core.BeatMark{}, 1},
		{"two backwards, then forward", []beat{{10, 100}, {9, 200}, {8, 300}, {11, 400}, {12, 500}}, -1, "", core.BeatMark{}, core.BeatMark{}, 2},
		{"seq backwards three times", []beat{{10, 100}, {9, 200}, {8, 300}, {7, 400}}, 3, "seq", core.BeatMark{10, 100}, core.BeatMark{7, 400}, 3},
		{"seq repeated three times", []beat{{5, 100}, {5, 200}, {5, 300}, {5, 400}}, 3, "seq", core.BeatMark{5, 100}, core.BeatMark{5, 400}, 3},
		{"client time backwards three times", []beat{{1, 1000}, {2, 900}, {3, 800}, {4, 700}}, 3, "client_ts", core.BeatMark{1, 1000}, core.BeatMark{4, 700}, 0},
		{"both in one run", []beat{{1, 1000}, {2, 900}, {1, 950}, {0, 0}, {2, 940}}, 4, "seq and client_ts", core.BeatMark{1, 1000}, core.BeatMark{2, 940}, 1},
		{"no client time never goes back", []beat{{1, 0}, {2, 0}, {3, 0}, {4, 0}}, -1, "", core.BeatMark{}, core.BeatMark{}, 0},
		{"pongs do not count", []beat{{5, 500}, {0, 0}, {0, 0}, {0, 0}, {6, 600}}, -1, "", core.BeatMark{}, core.BeatMark{}, 0},
		{"a second run after a trip", []beat{{9, 9}, {8, 8}, {7, 7}, {6, 6}, {5, 5}, {4, 4}, {3, 3}}, 3, "seq and client_ts", core.BeatMark{9, 9}, core.BeatMark{6, 6}, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b core.Beats
			trips := 0
			for i, x := range tc.beats {
				res := b.Beat(x.seq, x.ts)
				if res.Drift == nil {
					continue
				}
				trips++
				if trips == 1 {
					if i != tc.tripAt || res.Drift.Cause != tc.cause || res.Drift.Before != tc.before || res.Drift.After != tc.after {
						t.Fatalf("tripped at beat %d: %+v, want at %d cause %q before %v after %v", i, *res.Drift, tc.tripAt, tc.cause, tc.before, tc.after)
					}
				}
			}
			if trips == 0 && tc.tripAt >= 0 {
				t.Fatalf("never tripped, want at beat %d", tc.tripAt)
			}
			if tc.tripAt < 0 && trips > 0 {
				t.Fatalf("tripped %d times, want never", trips)
			}
			if int(b.Restarts) != tc.restart {
				t.Fatalf("restarts %d, want %d", b.Restarts, tc.restart)
			}
		})
	}
}

// A fuse tripped again needs a whole new run: the beats that tripped it
// start the next one from scratch, and Reset (after a state sync) forgets
// the sequence but not the restarts counted.
func TestBeatsResetAndRetrip(t *testing.T) {
	var b core.Beats
	for _, s := range []uint64{9, 8, 7} {
		b.Beat(s, 0)
	}
	if res := b.Beat(6, 0); res.Drift == nil {
		t.Fatal("three in a row did not trip")
	}
	for _, s := range []uint64{5, 4} {
		if b.Beat(s, 0).Drift != nil {
			t.Fatal("tripped again before a whole run")
		}
	}
	restarts := b.Restarts
	b.Reset()
	if b.Restarts != restarts || b.Seq != 0 {
		t.Fatalf("after Reset: %+v", b)
	}
	if res := b.Beat(1, 0); res.Restart || res.Drift != nil {
		t.Fatalf("first beat after Reset: %+v", res)
	}
}

// A declared active lapses to idle IdleAfter after its last declaration;
// declaring active again moves the lapse and tells nothing; every change
// grows the generation.
func TestDeviceStateLapse(t *testing.T) {
	const idleAfter = 10 * time.Minute
	d := core.NewDeviceState(mobile, active, t0, idleAfter)
	if at, ok := d.LapseAt(); !ok || !at.Equal(t0.Add(idleAfter)) || !d.LastActive.Equal(t0) {
		t.Fatalf("new active: %+v", d)
	}
	gen := d.Gen
	if d.Declare(active, at(5*time.Minute), idleAfter) || d.Gen != gen {
		t.Fatal("a renewed active reported a change")
	}
	if d.Lapse(at(14 * time.Minute)) {
		t.Fatal("lapsed before its time (renewed at 5 min)")
	}
	if !d.Lapse(at(15*time.Minute)) || d.Activity != idle || !d.At.Equal(at(15*time.Minute)) || !d.LastActive.Equal(at(5*time.Minute)) || d.Gen != gen+1 {
		t.Fatalf("lapse at 15 min: %+v", d)
	}
	if _, ok := d.LapseAt(); ok {
		t.Fatal("an idle device has a lapse")
	}
	if !d.Declare(background, at(16*time.Minute), idleAfter) || d.Activity != background || d.Gen != gen+2 {
		t.Fatalf("declare background: %+v", d)
	}
	if !d.SetDirty(true) || d.SetDirty(true) || d.Gen != gen+3 {
		t.Fatalf("dirty: %+v", d)
	}
	h := &messages.Holder{}
	d.Fill(h)
	if h.GetPlatform() != mobile || h.GetActivity() != background || !h.GetDirty() || h.GetStateGen() != d.Gen ||
		h.GetActivityAtMs() != at(16*time.Minute).UnixMilli() || h.GetLastActiveMs() != at(5*time.Minute).UnixMilli() {
		t.Fatalf("Fill: %v", h)
	}
	bg := core.NewDeviceState(mobile, background, t0, idleAfter)
	if _, ok := bg.LapseAt(); ok || !bg.LastActive.IsZero() {
		t.Fatalf("connected in the background: %+v", bg)
	}
}
