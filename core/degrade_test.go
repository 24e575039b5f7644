package core_test

import (
	"testing"
	"time"

	"github.com/presence-im/presence/core"
)

// The mode as a table of readings, one every 100 ms: enter at At, leave
// only after RestoreAfter under Below, a reading at or over Below on the
// way starting the wait again.
func TestDegraderHysteresis(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		readings []time.Duration
		want     []core.Change // the non-Stay changes, with their reading's index
		at       []int
	}{
		{"calm", []time.Duration{0, 10 * ms, 400 * ms, 0}, nil, nil},
		{"over At", []time.Duration{0, 600 * ms, 700 * ms}, []core.Change{core.Degrade}, []int{1}},
		{"back under Below for RestoreAfter", []time.Duration{600 * ms, 50 * ms, 50 * ms, 50 * ms, 50 * ms}, []core.Change{core.Degrade, core.Restore}, []int{0, 4}},
		{"between the thresholds holds degraded", []time.Duration{600 * ms, 200 * ms, 300 * ms, 200 * ms, 200 * ms, 200 * ms}, []core.Change{core.Degrade}, []int{0}},
		{"a reading over Below restarts the wait", []time.Duration{600 * ms, 50 * ms, 50 * ms, 150 * ms, 50 * ms, 50 * ms, 50 * ms, 50 * ms}, []core.Change{core.Degrade, core.Restore}, []int{0, 7}},
		{"again after a restore", []time.Duration{600 * ms, 0, 0, 0, 0, 600 * ms}, []core.Change{core.Degrade, core.Restore, core.Degrade}, []int{0, 4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := core.Degrader{At: 500 * ms, Below: 100 * ms, RestoreAfter: 300 * ms}
			t0 := time.Unix(1_800_000_000, 0)
			var got []core.Change
			var at []int
			for i, r := range tc.readings {
				if c := d.Observe(r, t0.Add(time.Duration(i)*100*ms)); c != core.Stay {
					got, at = append(got, c), append(at, i)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("changes %v at %v, want %v at %v", got, at, tc.want, tc.at)
			}
			for i := range got {
				if got[i] != tc.want[i] || at[i] != tc.at[i] {
					t.Fatalf("changes %v at %v, want %v at %v", got, at, tc.want, tc.at)
				}
			}
		})
	}
}
