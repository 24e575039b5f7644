package client

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
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

// chunk keeps the order, at most core.MaxTargets a request, and each
// request's frame, in either encoding, within messages.MaxMessage.
func TestChunkFitsAMessage(t *testing.T) {
	var long []string
	for i := range 1000 {
		long = append(long, fmt.Sprintf("%04d", i)+strings.Repeat("x", 124))
	}
	chunks := chunk(long)
	if got := slices.Concat(chunks...); !slices.Equal(got, long) || len(chunks) < 2 {
		t.Fatalf("%d chunks of %d targets, want them all, in order, in more than one", len(chunks), len(got))
	}
	for _, ts := range chunks {
		f := &messages.Frame{Kind: &messages.Frame_Subscribe{Subscribe: &messages.Subscribe{RequestId: "r18446744073709551615", Targets: ts, Tier: messages.Tier_batched}}}
		j, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(f)
		b, _ := proto.Marshal(f)
		if len(j) > messages.MaxMessage || len(b) > messages.MaxMessage {
			t.Fatalf("a chunk of %d targets: %d bytes of JSON, %d of protobuf, over %d", len(ts), len(j), len(b), messages.MaxMessage)
		}
	}
	short := make([]string, 2500)
	for i := range short {
		short[i] = "a"
	}
	if got := chunk(short); len(got) != 3 || len(got[0]) != core.MaxTargets || len(got[2]) != 500 {
		t.Fatalf("2500 short ids in %d chunks, want 1000, 1000, 500", len(got))
	}
}
