package sim

import (
	"testing"

	"github.com/presence-im/presence/config"
)

// Issue 24: the state after a failover equals the declared one, on both
// presets, for several seeds.
func TestActivityAcrossOwnerCrash(t *testing.T) {
	for _, preset := range []string{"seed", "fast"} {
		tm, _ := config.Preset(preset)
		for seed := int64(1); seed <= 3; seed++ {
			r := Activity(tm, preset, seed, 100)
			if !r.OK {
				t.Fatalf("%s seed %d: %+v", preset, seed, r)
			}
		}
	}
}

// The check can fail: connections that do not carry their state in the
// re-register (a holder without it) leave the re-created views wrong.
func TestActivityCheckFailsWithoutTheState(t *testing.T) {
	tm := config.Fast()
	w := NewWorld(tm, 1)
	w.Gateway("g1")
	w.Watch("u")
	w.Connect("g1", "u", "phone", 1)
	w.Run(tm.Check)
	w.Declare("g1", "u", "phone", 3) // background
	w.Run(2 * tm.Check)
	c := w.find("g1", "u", "phone")
	var r ActivityReport
	if n := w.matching(&r, true); n != 1 {
		t.Fatalf("before: %d matching, %v", n, r.Lost)
	}
	c.state.Activity = 1 // the device says active, its holder never told
	c.state.Gen++
	if n := w.matching(&r, true); n != 0 || len(r.Lost) != 1 {
		t.Fatalf("a view that differs from the declared state was counted: %d, %v", n, r.Lost)
	}
}
