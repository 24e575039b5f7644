package cluster

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// The split-brain resolver: which side of a split keeps serving. It is the
// rule of Akka Cluster's keep-majority with a stable-after period:
//
//   - the quorum base is the members this node knew: itself, the alive and
//     suspect ones, and the dead ones for less than the stable period. A
//     member dead past it leaves the base (the node kept serving all that
//     time, so it was on the deciding side), so crashes one after another
//     shrink the cluster instead of ending it;
//   - a side reaching more than half of its base serves;
//   - a side reaching exactly half serves if it holds the oldest member of
//     the base (the earliest Meta.Up, then the lowest id): both sides see
//     the same members' metadata, so they break the tie the same way;
//   - a side reaching less than half fences.
//
// Members that crash within one stable period of each other count as one
// event: a 3-node cluster losing two at once fences its survivor, as a
// minority partition must (the survivor cannot tell the two apart).

// Voter is one member of the quorum base as a node sees it.
type Voter struct {
	ID      string `json:"id"`
	Up      int64  `json:"up"` // Meta.Up: when this incarnation started, unix ms
	Reached bool   `json:"-"`  // itself, or seen alive
}

// Verdict is the resolver's answer for one side.
type Verdict struct {
	Serve  bool
	Reach  int    // members of the base this side reaches
	Base   int    // members in the base
	Oldest string // the oldest member of the base: the tie-break's winner
}

// Tie reports whether the side reaches exactly half of its base.
func (v Verdict) Tie() bool { return 2*v.Reach == v.Base }

func (v Verdict) String() string {
	s := fmt.Sprintf("reaches %d of the %d members of its quorum base", v.Reach, v.Base)
	if v.Tie() {
		s += fmt.Sprintf(", a tie broken for the side holding the oldest member, %s", v.Oldest)
	}
	return s
}

// Oldest is the base's oldest member: the earliest Up, then the lowest id
// (an Up of 0, unknown, counts as the youngest).
func Oldest(base []Voter) Voter {
	if len(base) == 0 {
		return Voter{}
	}
	up := func(v Voter) int64 {
		if v.Up <= 0 {
			return 1<<63 - 1
		}
		return v.Up
	}
	return slices.MinFunc(base, func(a, b Voter) int {
		return cmp.Or(cmp.Compare(up(a), up(b)), cmp.Compare(a.ID, b.ID))
	})
}

// Decide is the keep-majority rule with the oldest-member tie-break over a
// quorum base (itself included, as reached).
func Decide(base []Voter) Verdict {
	v := Verdict{Base: len(base), Oldest: Oldest(base).ID}
	oldestReached := false
	for _, m := range base {
		if m.Reached {
			v.Reach++
			oldestReached = oldestReached || m.ID == v.Oldest
		}
	}
	v.Serve = 2*v.Reach > v.Base || v.Tie() && oldestReached
	return v
}

// StableAfter is how long a member must have been dead before it leaves the
// quorum base: twice the failure detection for n members, so that the
// members lost to one split (declared dead up to a failure detection apart)
// all still count when the side decides.
func StableAfter(preset string, n int) time.Duration {
	return 2 * FailureDetection(preset, n)
}
