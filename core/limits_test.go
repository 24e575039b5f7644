package core_test

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// The subscription limit counts every target a connection holds, over all
// its requests: a subscribe that would pass it is refused whole and adds
// nothing, subscribing again to held targets is free, and an unsubscribe
// makes room.
func TestSinkSubscriptionLimit(t *testing.T) {
	s := core.NewSink()
	s.Max = 4
	mustAsk := func(id string, targets ...string) {
		t.Helper()
		if _, err := s.Subscribe(id, targets, messages.Tier_realtime); err != nil {
			t.Fatalf("Subscribe(%s, %v) = %v, want it taken", id, targets, err)
		}
	}
	mustRefuse := func(id string, targets ...string) {
		t.Helper()
		before := slices.Sorted(maps.Keys(s.Targets()))
		asks, err := s.Subscribe(id, targets, messages.Tier_realtime)
		if !errors.Is(err, core.ErrTooManySubscriptions) || asks != nil {
			t.Fatalf("Subscribe(%s, %v) = %v, %v; want ErrTooManySubscriptions", id, targets, asks, err)
		}
		if after := slices.Sorted(maps.Keys(s.Targets())); !slices.Equal(after, before) {
			t.Fatalf("a refused subscribe changed the targets: %v -> %v", before, after)
		}
	}
	mustAsk("s1", "a", "b", "c")
	mustRefuse("s2", "d", "e")        // 3 + 2 > 4
	mustAsk("s3", "a", "b", "d", "d") // one new (d, twice): 4
	mustRefuse("s4", "e")             // full
	mustAsk("s5", "a", "b", "c", "d") // all held: free
	s.Unsubscribe([]string{"b"})
	mustAsk("s6", "e")
	mustRefuse("s7", "f")
	if got := slices.Sorted(maps.Keys(s.Targets())); !slices.Equal(got, []string{"a", "c", "d", "e"}) {
		t.Fatalf("targets = %v", got)
	}
	// A target unsubscribed while its snapshot is on its way stays
	// unsubscribed when its part arrives: it takes no room.
	s.Unsubscribe([]string{"e"})
	s.SnapshotPart("s6", "e", true, &messages.Presence{User: "e", Status: messages.Status_online, Version: 1})
	if _, ok := s.Targets()["e"]; ok || len(s.Targets()) != 3 {
		t.Fatalf("targets = %v after e's part came for an unsubscribed e", s.Targets())
	}
	mustAsk("s8", "f")
}

// Admit lets in a device online already (a reconnect) or admitted already,
// and a new one only below the limit; an admitted device holds its place
// until it is up or its hold runs out.
func TestViewAdmitDevices(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := core.NewView("alice", time.Second, nil, time.Time{})
	hold := now.Add(10 * time.Second)
	check := func(device string, at time.Time, wantOK bool, wantN int) {
		t.Helper()
		if ok, n := v.Admit(device, 2, at, at.Add(10*time.Second)); ok != wantOK || n != wantN {
			t.Fatalf("Admit(%s) at %v = %v, %d; want %v, %d", device, at.Sub(now), ok, n, wantOK, wantN)
		}
	}
	v.DeviceUp("phone", &messages.Holder{Node: "n1", ConnId: "c1", Epoch: 1}, now)
	check("phone", now, true, 1)  // online: a reconnect
	check("laptop", now, true, 2) // admitted, not up yet
	check("tablet", now, false, 2)
	check("laptop", now, true, 2) // admitted already
	v.DeviceUp("laptop", &messages.Holder{Node: "n1", ConnId: "c2", Epoch: 1}, now)
	check("tablet", now, false, 2)
	v.DeviceDown("phone", 1, now, now)
	check("tablet", now, true, 2) // room again
	// A handshake that failed after its admission (tablet never comes up)
	// frees its place at its hold.
	v.DeviceDown("laptop", 1, now, now)
	check("watch", now.Add(5*time.Second), true, 2) // tablet and watch admitted
	check("pad", now.Add(5*time.Second), false, 2)
	check("pad", hold, true, 2) // tablet's hold ran out: watch and pad
}
