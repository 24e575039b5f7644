package core_test

import (
	"strings"
	"testing"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

func presence(user string, version uint64) *messages.Presence {
	return &messages.Presence{User: user, Version: version}
}

// kinds names each frame: "snapshot[users]" or "presence user@version".
func kinds(fs []*messages.Frame) []string {
	var out []string
	for _, f := range fs {
		switch k := f.GetKind().(type) {
		case *messages.Frame_Snapshot:
			var users []string
			for _, p := range k.Snapshot.GetPresences() {
				users = append(users, p.GetUser())
			}
			out = append(out, "snapshot["+strings.Join(users, ",")+"]")
		case *messages.Frame_Presence:
			out = append(out, "presence "+k.Presence.GetUser()+"@"+string(rune('0'+k.Presence.GetVersion())))
		}
	}
	return out
}

// An event that overtakes its target's snapshot is held and sent after the
// snapshot; one not newer than what the device has is dropped.
func TestSinkHoldsEventsUntilTheSnapshotAndKeepsVersionOrder(t *testing.T) {
	s := core.NewSink()
	asks, err := s.Subscribe("s1", []string{"alice", "bob"}, messages.Tier_realtime)
	if err != nil || len(asks) != 2 {
		t.Fatalf("Subscribe = %v, %v; want both targets asked", asks, err)
	}
	if got := kinds(s.Event(presence("alice", 5))); got != nil {
		t.Fatalf("event before the snapshot sent %v, want it held", got)
	}
	if got := kinds(s.SnapshotPart("s1", "alice", true, presence("alice", 3))); got != nil {
		t.Fatalf("first part sent %v, want nothing until bob answers", got)
	}
	got := kinds(s.SnapshotPart("s1", "bob", true, presence("bob", 2)))
	if want := []string{"snapshot[alice,bob]", "presence alice@5"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("last part sent %v, want %v", got, want)
	}
	if got := kinds(s.Event(presence("alice", 4))); got != nil {
		t.Fatalf("an older event was sent: %v", got)
	}
	if got := kinds(s.Event(presence("carol", 9))); got != nil {
		t.Fatalf("an event of a target never subscribed was sent: %v", got)
	}
	if dropped := s.Unsubscribe([]string{"bob", "bob", "dave"}); len(dropped) != 1 {
		t.Fatalf("Unsubscribe dropped %v, want bob once", dropped)
	}
}

// A bad subscribe answers with the rule it broke and leaves nothing behind.
func TestSinkRefusesBadSubscribes(t *testing.T) {
	s := core.NewSink()
	if _, err := s.Subscribe("s1", []string{"alice"}, messages.Tier_realtime); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id      string
		targets []string
		want    string
	}{
		{"s2", nil, "0 targets: must be 1 to 1000"},
		{"s2", make([]string, core.MaxTargets+1), "1001 targets"},
		{"s1", []string{"bob"}, `request_id "s1" is already pending`},
		{"s3", []string{"bob", "a/b"}, "target"},
	} {
		asks, err := s.Subscribe(tc.id, tc.targets, messages.Tier_realtime)
		if err == nil || !strings.Contains(err.Error(), tc.want) || asks != nil {
			t.Errorf("Subscribe(%s, %d targets) = %v, %v; want an error naming %q", tc.id, len(tc.targets), asks, err, tc.want)
		}
	}
	if len(s.Targets()) != 1 {
		t.Fatalf("targets = %v, want only alice", s.Targets())
	}
}
