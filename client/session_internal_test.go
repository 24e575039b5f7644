package client

import (
	"context"
	"testing"
	"time"

	"github.com/presence-im/presence/messages"
)

// A snapshot replaces the state of the targets it answers: one that is
// absent is not visible and is forgotten, not kept stale.
func TestSnapshotForgetsInvisibleTargets(t *testing.T) {
	s := &Session{events: make(chan Event, 10), state: map[string]*messages.Presence{"x": {User: "x", Version: 9}}}
	s.mu.Lock()
	id := s.request([]string{"x", "y"})
	s.mu.Unlock()
	s.snapshot(context.Background(), &messages.Snapshot{RequestId: id, Presences: []*messages.Presence{{User: "y", Version: 1}}})
	if _, ok := s.State("x"); ok {
		t.Fatal("x, now invisible, is still in the state")
	}
	if p, ok := s.State("y"); !ok || p.GetVersion() != 1 {
		t.Fatalf("y = %v", p)
	}
}

// Events whose version is not newer than the last kept are dropped.
func TestChangeDropsOlderVersions(t *testing.T) {
	s := &Session{events: make(chan Event, 10), state: map[string]*messages.Presence{}}
	ctx := context.Background()
	s.snapshot(ctx, &messages.Snapshot{Presences: []*messages.Presence{{User: "a", Version: 5, Status: messages.Status_offline}}})
	for _, v := range []uint64{4, 5, 7, 6} {
		s.change(ctx, &messages.Presence{User: "a", Version: v, Status: messages.Status_online})
	}
	var got []uint64
	for len(s.events) > 0 {
		got = append(got, (<-s.events).Presence.GetVersion())
	}
	if len(got) != 2 || got[0] != 5 || got[1] != 7 {
		t.Fatalf("delivered versions %v, want [5 7]", got)
	}
	if p, _ := s.State("a"); p.GetVersion() != 7 {
		t.Fatalf("state version %d, want 7", p.GetVersion())
	}
}

func TestBackoffIsCapped(t *testing.T) {
	d := 100 * time.Millisecond
	for range 20 {
		d = nextBackoff(d, 30*time.Second)
	}
	if d != 30*time.Second {
		t.Fatalf("backoff %v, want the 30 s cap", d)
	}
}

// Attempts grow strictly and start from the clock, so a restarted device
// is above any attempt it used before.
func TestAttemptsGrowFromTheClock(t *testing.T) {
	s := &Session{}
	before := uint64(time.Now().UnixMilli())
	a, b := s.nextAttempt(), s.nextAttempt()
	if a < before || b <= a {
		t.Fatalf("attempts %d, %d (clock %d)", a, b, before)
	}
}
