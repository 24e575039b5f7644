package admin

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The ring keeps the last events in order; the timeline keeps one entry
// per change however many members report it, and names a return after a
// death "rejoined".
func TestHistoryRingAndTimeline(t *testing.T) {
	h := NewHistory(4)
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
func TestHistoryTimelineBounded(t *testing.T) {
	h := NewHistory(8)
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
func TestHistoryRingCopiesEvents(t *testing.T) {
	h := NewHistory(3)
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
