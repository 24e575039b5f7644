package cluster

import (
	"testing"
	"time"
)

// voters builds a quorum base: "+" before an id marks a reached member;
// Up is the order given (the first is the oldest).
func voters(ids ...string) []Voter {
	out := []Voter{}
	for i, id := range ids {
		v := Voter{Up: int64(1000 + i)}
		v.ID, v.Reached = id, id[0] == '+'
		if v.Reached {
			v.ID = id[1:]
		}
		out = append(out, v)
	}
	return out
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name  string
		base  []Voter
		serve bool
	}{
		{"alone", voters("+n1"), true},
		{"all reached", voters("+n1", "+n2", "+n3"), true},
		{"3: one lost, the majority serves", voters("+n1", "n2", "+n3"), true},
		{"3: two lost at once, the survivor fences", voters("+n1", "n2", "n3"), false},
		{"3: the minority side fences", voters("n1", "+n2", "n3"), false},
		{"2: the oldest survives the younger's death", voters("+n1", "n2"), true},
		{"2: the younger fences when the oldest is lost", voters("n1", "+n2"), false},
		{"4: 2+2, the side with the oldest serves", voters("+n1", "n2", "n3", "+n4"), true},
		{"4: 2+2, the other side fences", voters("n1", "+n2", "+n3", "n4"), false},
		{"5: 3+2", voters("n1", "n2", "+n3", "+n4", "+n5"), true},
		{"5: 2+2+1, no side serves without a majority", voters("+n1", "+n2", "n3", "n4", "n5"), false},
		{"5: the single one of 2+2+1", voters("n1", "n2", "n3", "n4", "+n5"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(tc.base)
			if v.Serve != tc.serve {
				t.Fatalf("Decide = %+v (%s), want serve %v", v, v, tc.serve)
			}
		})
	}
}

// Both sides of a tie name the same winner, whatever order they list the
// members in; an unknown start time (0) counts as the youngest, then ids.
func TestOldestIsTheSameOnBothSides(t *testing.T) {
	a := []Voter{{ID: "b", Up: 5}, {ID: "a", Up: 7}, {ID: "c", Up: 5}}
	b := []Voter{{ID: "c", Up: 5}, {ID: "a", Up: 7}, {ID: "b", Up: 5}}
	if Oldest(a).ID != "b" || Oldest(b).ID != "b" {
		t.Fatalf("oldest: %v / %v, want b (earliest up, then lowest id)", Oldest(a), Oldest(b))
	}
	if got := Oldest([]Voter{{ID: "a"}, {ID: "z", Up: 9}}).ID; got != "z" {
		t.Fatalf("an unknown start time won: %s", got)
	}
}

// Sequential crashes shrink the cluster: 3 nodes, n3 dies; after the stable
// period the base is {n1, n2}; n2 dies: n1, the oldest, serves alone. Had
// n2 died within the stable period of n3, n1 would have fenced.
func TestSequentialCrashesShrinkTheBase(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stable := StableAfter("fast", 3)
	g := members(now, map[string]State{"n2": Dead, "n3": Dead}, map[string]time.Duration{"n3": stable + time.Millisecond})
	if v := Decide(g.Base(now, stable)); !v.Serve || v.Base != 2 {
		t.Fatalf("second crash after the stable period: %+v, want serve over a base of 2", v)
	}
	g = members(now, map[string]State{"n2": Dead, "n3": Dead}, map[string]time.Duration{"n3": stable - time.Millisecond})
	if v := Decide(g.Base(now, stable)); v.Serve {
		t.Fatalf("two crashes within the stable period: %+v, want fence", v)
	}
}

// A fenced node's new incarnation (ids as in the base; the first is the
// oldest) serves once the resolver lets it. fenced lists the alive members
// that are fenced incarnations still waiting (itself among them).
func TestRejoinVerdict(t *testing.T) {
	fenced := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stable := 5 * time.Second
	five := voters("n1", "n2", "n3", "n4", "n5")
	for _, tc := range []struct {
		name          string
		base          []Voter
		alive, fenced []string
		lease         bool
		after         time.Duration
		serve         bool
	}{
		{"a majority of the base answers", voters("n1", "n2", "n3"), []string{"n3", "n2"}, nil, false, 0, true},
		{"a restarted peer under another name counts", voters("n1", "n2", "n3"), []string{"n3", "n2-x"}, nil, false, 0, true},
		{"alone of three, ever: no", voters("n1", "n2", "n3"), []string{"n1"}, nil, false, time.Hour, false},
		{"the oldest of two, alone: not before the stable period", voters("n1", "n3"), []string{"n1"}, nil, false, stable - time.Millisecond, false},
		{"the oldest of two, alone: after it", voters("n1", "n3"), []string{"n1"}, nil, false, stable, true},
		{"the younger of two, alone: never", voters("n1", "n3"), []string{"n3"}, nil, false, time.Hour, false},
		{"two of four with the oldest", voters("n1", "n2", "n3", "n4"), []string{"n4", "n1"}, nil, false, 0, true},
		{"two of four without it", voters("n1", "n2", "n3", "n4"), []string{"n2", "n3"}, nil, false, time.Hour, false},
		// majority: every side of 2+2+1 fenced; after the heal the fenced
		// nodes form the cluster (none serves elsewhere: no side had more
		// than half of the base)
		{"majority: three fenced of five", five, []string{"n5", "n1", "n2"}, []string{"n5", "n1", "n2"}, false, 0, true},
		// lease: {n3, n4} took the lease and serve; {n1, n2} and {n5} fenced
		// (issue 13: they formed a second cluster after the heal)
		{"lease: three fenced of five, the lease side not reached", five, []string{"n5", "n1", "n2"}, []string{"n5", "n1", "n2"}, true, time.Hour, false},
		{"lease: the serving side reached", five, []string{"n5", "n1", "n2", "n3", "n4"}, []string{"n5", "n1", "n2"}, true, 0, true},
		{"lease: one serving member, the holder, suffices", five, []string{"n5", "n3"}, []string{"n5"}, true, 0, true},
		{"lease: the oldest of two, alone past the stable period: no", voters("n1", "n3"), []string{"n1"}, []string{"n1"}, true, time.Hour, false},
		{"lease: every member of the base reached, all fenced", five, []string{"n1", "n2", "n3", "n4", "n5"}, []string{"n1", "n2", "n3", "n4", "n5"}, true, 0, true},
		{"lease: four of five, all fenced: no (the fifth may hold the lease)", five, []string{"n1", "n2", "n3", "n4"}, []string{"n1", "n2", "n3", "n4"}, true, time.Hour, false},
		{"lease: a restarted peer under another name, serving", voters("n1", "n2", "n3"), []string{"n1", "n2-x"}, []string{"n1"}, true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Rejoin{Base: tc.base, Fenced: fenced, Stable: stable, Lease: tc.lease}
			if v := r.Verdict(tc.alive, tc.fenced, fenced.Add(tc.after)); v.Serve != tc.serve {
				t.Fatalf("Verdict = %+v (%s), want serve %v", v, v, tc.serve)
			}
		})
	}
}
