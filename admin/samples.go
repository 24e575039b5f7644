package admin

import (
	"unique"
)

// sampleKinds are the actor kinds a sample keeps (actors.Node.Counts), in
// the order of a slot's counts. A kind a member of a later version counts
// and this one does not know is left out of the samples.
var sampleKinds = [...]string{"lease", "view", "gateway", "connection"}

// sampleSlot is one sample of the ring: its time, the cluster's actors by
// kind, and how many members' renewals it holds.
type sampleSlot struct {
	at      int64
	actors  [len(sampleKinds)]int
	members int
}

// samples keeps the last maxSamples samples in memory allocated when the
// ring is made, each member's renewals in a row of ids and counts the
// ring's width long. A sample allocated as it came (two maps, a SampleEvery
// for ten minutes) would stay reachable among the garbage of its moment,
// each of its objects keeping the span it landed in in use for those ten
// minutes, during a wave of devices among that wave's garbage
// (docs/architecture.md, "Memory"). A cluster larger than the width widens
// every row once. Member ids are kept as unique handles: the ring's
// handles keep each id's one copy alive, so that a sample allocates
// nothing for them either, collections in between or not (a string taken
// out of a handle would not keep it: the next sample after a collection
// would make the id again).
type samples struct {
	slots    []sampleSlot // up to maxSamples, oldest at next once full
	next     int
	width    int
	ids      []unique.Handle[string] // slot i's members: ids[i*width : i*width+slots[i].members]
	renewals []uint64                // theirs, in the same places
}

func newSamples(width int) *samples {
	return &samples{slots: make([]sampleSlot, 0, maxSamples), width: width,
		ids: make([]unique.Handle[string], maxSamples*width), renewals: make([]uint64, maxSamples*width)}
}

// add keeps one sample, over the oldest when full.
func (s *samples) add(at int64, actors map[string]int, renewals map[string]uint64) {
	if len(renewals) > s.width {
		s.widen(max(len(renewals), 2*s.width))
	}
	i := s.next
	if len(s.slots) < cap(s.slots) {
		i = len(s.slots)
		s.slots = s.slots[:i+1]
	} else {
		s.next = (s.next + 1) % len(s.slots)
	}
	sl := &s.slots[i]
	*sl = sampleSlot{at: at, members: len(renewals)}
	for k, name := range sampleKinds {
		sl.actors[k] = actors[name]
	}
	ids, counts := s.row(i)
	n := 0
	for id, c := range renewals {
		ids[n], counts[n] = unique.Make(id), c
		n++
	}
}

// row is slot i's member ids and renewals.
func (s *samples) row(i int) ([]unique.Handle[string], []uint64) {
	a, b := i*s.width, i*s.width+s.slots[i].members
	return s.ids[a:b], s.renewals[a:b]
}

// widen gives every row room for width members.
func (s *samples) widen(width int) {
	ids, renewals := make([]unique.Handle[string], maxSamples*width), make([]uint64, maxSamples*width)
	for i := range s.slots {
		a, b := s.row(i)
		copy(ids[i*width:], a)
		copy(renewals[i*width:], b)
	}
	s.width, s.ids, s.renewals = width, ids, renewals
}

// list gives the samples back as GET /api/history shows them, oldest
// first.
func (s *samples) list() []Sample {
	out := make([]Sample, 0, len(s.slots))
	for k := range s.slots {
		i := (s.next + k) % len(s.slots)
		sl := &s.slots[i]
		smp := Sample{AtMs: sl.at, Actors: make(map[string]int, len(sampleKinds)), Renewals: make(map[string]uint64, sl.members)}
		for k, name := range sampleKinds {
			smp.Actors[name] = sl.actors[k]
		}
		ids, counts := s.row(i)
		for j, id := range ids {
			smp.Renewals[id.Value()] = counts[j]
		}
		out = append(out, smp)
	}
	return out
}
