package admin

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The ring keeps the last events in order; the timeline keeps one entry
// per change however many members report it, and names a return after a
// death "rejoined".
func TestRecorderRingAndTimeline(t *testing.T) {
	h := NewRecorder(4)
	for i := range 6 {
		h.Add(Event{Kind: "device_up", Node: "n1", AtMs: int64(i), User: fmt.Sprint("u", i)})
	}
	for i, st := range []string{"alive", "alive", "dead", "dead", "alive"} {
		h.Add(Event{Kind: "member", Node: fmt.Sprint("n", 1+i%2), AtMs: int64(10 + i), Member: "n3", Reason: st})
	}
	h.Add(Event{Kind: "fence", Node: "n2", AtMs: 20, Member: "n2", Reason: "minority"})
	s := h.Snapshot()
	var at []int64
	for _, ev := range s.Events {
		at = append(at, ev.AtMs)
	}
	if want := []int64{12, 13, 14, 20}; !slices.Equal(at, want) || s.Capacity != 4 {
		t.Fatalf("ring holds %v (capacity %d), want %v", at, s.Capacity, want)
	}
	var states []string
	for _, tr := range s.Members["n3"] {
		states = append(states, tr.State)
	}
	if want := []string{"alive", "dead", "rejoined"}; !slices.Equal(states, want) {
		t.Fatalf("n3's timeline %v, want %v", states, want)
	}
	if tl := s.Members["n2"]; len(tl) != 1 || tl[0].State != "fenced" || tl[0].SeenBy != "n2" {
		t.Fatalf("n2's timeline %+v, want fenced", tl)
	}
}

// A timeline is bounded per member and in members.
func TestRecorderTimelineBounded(t *testing.T) {
	h := NewRecorder(8)
	for i := range maxMembers + 10 {
		for j := range maxTransitions + 5 {
			h.Add(Event{Kind: "member", Node: "n1", AtMs: int64(j), Member: fmt.Sprint("m", i), Reason: []string{"alive", "dead"}[j%2]})
		}
	}
	s := h.Snapshot()
	if len(s.Members) != maxMembers || len(s.Members["m0"]) != 0 || len(s.Members[fmt.Sprint("m", maxMembers+9)]) != maxTransitions {
		t.Fatalf("%d members, m0 %d, last %d transitions", len(s.Members), len(s.Members["m0"]), len(s.Members[fmt.Sprint("m", maxMembers+9)]))
	}
}

// The ring gives back each event as it came, one whose strings fit its
// slot and one with an id too long for it alike, and keeping an event
// allocates nothing: its strings are copied into the slot, so none of the
// heap objects they came in stays reachable from the ring.
func TestRecorderRingCopiesEvents(t *testing.T) {
	h := NewRecorder(3)
	fits := Event{Kind: "published", Node: "n1", AtMs: 7, User: "alice", Device: "phone", Gateway: "n2", Reason: "close", Status: "offline", LatencyMs: 1200, Member: ""}
	long := Event{Kind: "device_up", Node: "n3", AtMs: 8, User: strings.Repeat("u", 300), Device: "tablet"}
	edge := Event{Kind: "device_down", Node: "n1", AtMs: 9, User: strings.Repeat("v", slotText-len("device_down")-len("n1")), Device: ""}
	for _, ev := range []Event{fits, long, edge} {
		h.Add(ev)
	}
	if got, want := h.Snapshot().Events, []Event{fits, long, edge}; !slices.Equal(got, want) {
		t.Fatalf("ring gives back %+v, want %+v", got, want)
	}
	ev := Event{Kind: "device_up", Node: "n1", User: "carol", Device: "desk", Gateway: "n1"}
	if n := testing.AllocsPerRun(100, func() { h.Add(ev) }); n != 0 {
		t.Fatalf("Add allocates %v times per event, want 0", n)
	}
}

// The samples' ring keeps the last maxSamples in order with every
// member's renewals, widens for a cluster larger than its rows (older
// samples kept), and keeps a sample without allocating, a collection
// since the last one or not (its member ids stay interned).
func TestRecorderSamplesRing(t *testing.T) {
	h := NewRecorder(1)
	three := map[string]map[string]int{"n1": {"lease": 2, "view": 3}, "n2": {"gateway": 1, "connection": 4}}
	for i := range maxSamples + 10 {
		h.sample(three, map[string]uint64{"n2": uint64(i), "n1": uint64(2 * i), "n3": 7})
	}
	wide := map[string]uint64{}
	for i := range sampleWidth + 3 {
		wide[fmt.Sprint("m", i)] = uint64(i)
	}
	h.sample(three, wide)
	got := h.Snapshot().Samples
	if len(got) != maxSamples {
		t.Fatalf("%d samples kept, want %d", len(got), maxSamples)
	}
	first, last := got[0], got[len(got)-2]
	wantActors := map[string]int{"lease": 2, "view": 3, "gateway": 1, "connection": 4}
	if !maps.Equal(first.Actors, wantActors) || !maps.Equal(first.Renewals, map[string]uint64{"n1": 22, "n2": 11, "n3": 7}) {
		t.Fatalf("oldest sample kept %+v, want sample 11 (actors %v)", first, wantActors)
	}
	if !maps.Equal(last.Renewals, map[string]uint64{"n1": 2 * (maxSamples + 9), "n2": maxSamples + 9, "n3": 7}) {
		t.Fatalf("last three-member sample %+v after the ring widened", last)
	}
	if w := got[len(got)-1].Renewals; !maps.Equal(w, wide) {
		t.Fatalf("wide sample kept %v, want %v", w, wide)
	}
	renewals := map[string]uint64{"n2": 1, "n1": 2, "n3": 3}
	total := map[string]int{"lease": 1}
	h.samples.add(9, total, renewals)
	// A collection in between, as a node has many between samples. The
	// runtime's own work after a collection (cleanups) allocates now and
	// then: the fewest over a few tries is the sample's own.
	var before, after runtime.MemStats
	fewest := uint64(1 << 62)
	for range 5 {
		runtime.GC()
		runtime.ReadMemStats(&before)
		h.samples.add(9, total, renewals)
		runtime.ReadMemStats(&after)
		fewest = min(fewest, after.Mallocs-before.Mallocs)
	}
	if fewest != 0 {
		t.Fatalf("a sample after a collection allocates %d times, want 0", fewest)
	}
}
