package core_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

func state(user string, version uint64, st messages.Status) *messages.Presence {
	return &messages.Presence{User: user, Version: version, Status: st}
}

// batchOf names a flush's frames: "batch[user@version status,...]".
func batchOf(fs []*messages.Frame) string {
	var out []string
	for _, f := range fs {
		b := f.GetPresenceBatch()
		if b == nil {
			out = append(out, "not a batch")
			continue
		}
		var ps []string
		for _, p := range b.GetPresences() {
			ps = append(ps, fmt.Sprintf("%s@%d %v", p.GetUser(), p.GetVersion(), p.GetStatus()))
		}
		out = append(out, "batch["+strings.Join(ps, ",")+"]")
	}
	return strings.Join(out, "|")
}

func subscribed(t *testing.T, s *core.Sink, id string, tier messages.Tier, ps ...*messages.Presence) {
	t.Helper()
	var targets []string
	for _, p := range ps {
		targets = append(targets, p.GetUser())
	}
	if _, err := s.Subscribe(id, targets, tier); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		s.SnapshotPart(id, p.GetUser(), true, p)
	}
}

// The merge, as a table: each case sends events to batched targets
// (alice and bob, both online at version 1), then flushes once.
func TestSinkBatchedMerge(t *testing.T) {
	on, off := messages.Status_online, messages.Status_offline
	for _, tc := range []struct {
		name   string
		events []*messages.Presence
		want   string
	}{
		{"nothing changed", nil, ""},
		{"one change", []*messages.Presence{state("alice", 2, off)}, "batch[alice@2 offline]"},
		{"the latest of a run", []*messages.Presence{state("alice", 2, off), state("alice", 3, on), state("alice", 4, off)}, "batch[alice@4 offline]"},
		{"a flap that ends where it began", []*messages.Presence{state("alice", 2, off), state("alice", 3, on)}, ""},
		{"an older version after a newer", []*messages.Presence{state("alice", 3, off), state("alice", 2, on)}, "batch[alice@3 offline]"},
		{"not newer than the snapshot", []*messages.Presence{state("alice", 1, off)}, ""},
		{"two targets in order, one flapped back", []*messages.Presence{state("bob", 2, off), state("alice", 2, off), state("alice", 3, on)}, "batch[bob@2 offline]"},
		{"a target never subscribed", []*messages.Presence{state("carol", 5, off)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := core.NewSink()
			subscribed(t, s, "s1", messages.Tier_batched, state("alice", 1, on), state("bob", 1, on))
			for _, p := range tc.events {
				if fs := s.Event(p); fs != nil {
					t.Fatalf("a batched target's event was sent at once: %v", fs)
				}
			}
			if got := batchOf(s.Flush()); got != tc.want {
				t.Fatalf("flush = %q, want %q", got, tc.want)
			}
			if s.Due() != 0 || s.Flush() != nil {
				t.Fatalf("a second flush sends again (due %d)", s.Due())
			}
		})
	}
}

// After a flush the device's state is the batch's: a later change is
// compared with it, and versions keep growing.
func TestSinkBatchedAcrossWindows(t *testing.T) {
	on, off := messages.Status_online, messages.Status_offline
	s := core.NewSink()
	subscribed(t, s, "s1", messages.Tier_batched, state("alice", 1, on))
	s.Event(state("alice", 2, off))
	if got := batchOf(s.Flush()); got != "batch[alice@2 offline]" {
		t.Fatalf("first window: %q", got)
	}
	s.Event(state("alice", 3, on))
	s.Event(state("alice", 4, off)) // back to what the device has
	if got := batchOf(s.Flush()); got != "" {
		t.Fatalf("second window sent %q, want nothing", got)
	}
	// The flap's last version counts as the device's: a change older than
	// it, arriving late, is not news.
	if s.Event(state("alice", 3, on)); s.Due() != 0 {
		t.Fatal("a change older than the flap's end was taken")
	}
	s.Event(state("alice", 5, on))
	if got := batchOf(s.Flush()); got != "batch[alice@5 online]" {
		t.Fatalf("third window: %q", got)
	}
}

// A realtime and a batched target side by side; a subscribe again moves a
// target between tiers (its merged change dropped: the snapshot has it),
// an unsubscribe drops what was merged.
func TestSinkTiersSideBySide(t *testing.T) {
	on, off := messages.Status_online, messages.Status_offline
	s := core.NewSink()
	subscribed(t, s, "s1", messages.Tier_realtime, state("alice", 1, on))
	subscribed(t, s, "s2", messages.Tier_batched, state("bob", 1, on), state("carol", 1, on))
	if got := kinds(s.Event(state("alice", 2, off))); !slices.Equal(got, []string{"presence alice@2"}) {
		t.Fatalf("realtime event: %v", got)
	}
	s.Event(state("bob", 2, off))
	s.Event(state("carol", 2, off))
	if s.Due() != 2 {
		t.Fatalf("due = %d, want bob and carol", s.Due())
	}
	if _, err := s.Subscribe("s3", []string{"bob"}, messages.Tier_realtime); err != nil {
		t.Fatal(err)
	}
	if s.Due() != 1 {
		t.Fatalf("due = %d after bob went realtime, want carol only", s.Due())
	}
	got := kinds(s.SnapshotPart("s3", "bob", true, state("bob", 2, off)))
	if !slices.Equal(got, []string{"snapshot[bob]"}) {
		t.Fatalf("bob's snapshot: %v", got)
	}
	if got := kinds(s.Event(state("bob", 3, on))); !slices.Equal(got, []string{"presence bob@3"}) {
		t.Fatalf("bob realtime again: %v", got)
	}
	s.Unsubscribe([]string{"carol"})
	if s.Due() != 0 || s.Flush() != nil {
		t.Fatalf("an unsubscribed target's merged change was kept")
	}
}

// An event that overtakes a batched target's snapshot waits for the
// snapshot, then for the window.
func TestSinkBatchedHeldUntilTheSnapshot(t *testing.T) {
	s := core.NewSink()
	if _, err := s.Subscribe("s1", []string{"alice"}, messages.Tier_batched); err != nil {
		t.Fatal(err)
	}
	s.Event(state("alice", 5, messages.Status_offline))
	got := kinds(s.SnapshotPart("s1", "alice", true, state("alice", 4, messages.Status_online)))
	if !slices.Equal(got, []string{"snapshot[alice]"}) || s.Due() != 1 {
		t.Fatalf("snapshot sent %v with %d due; want the snapshot, the event merged", got, s.Due())
	}
	if got := batchOf(s.Flush()); got != "batch[alice@5 offline]" {
		t.Fatalf("flush: %q", got)
	}
}

// A query answers one snapshot and subscribes nothing; bad ones change
// nothing.
func TestSinkQuery(t *testing.T) {
	s := core.NewSink()
	asks, err := s.Query("q1", []string{"alice", "bob", "alice"})
	if err != nil || len(asks) != 2 {
		t.Fatalf("Query = %v, %v; want alice and bob asked once", asks, err)
	}
	if s.Event(state("alice", 9, messages.Status_online)) != nil {
		t.Fatal("an event of a queried, unsubscribed target was sent")
	}
	s.SnapshotPart("q1", "alice", true, state("alice", 3, messages.Status_online))
	got := kinds(s.SnapshotPart("q1", "bob", false, nil))
	if !slices.Equal(got, []string{"snapshot[alice]"}) {
		t.Fatalf("answer: %v, want alice only (bob hidden)", got)
	}
	if len(s.Targets()) != 0 || s.Pending() != 0 {
		t.Fatalf("a query left %d targets, %d pending", len(s.Targets()), s.Pending())
	}
	for _, tc := range []struct {
		id      string
		targets []string
		want    string
	}{
		{"q2", nil, "query: 0 targets: must be 1 to 1000"},
		{"q2", make([]string, core.MaxTargets+1), "1001 targets"},
		{"q3", []string{"a/b"}, "target"},
	} {
		if asks, err := s.Query(tc.id, tc.targets); err == nil || !strings.Contains(err.Error(), tc.want) || asks != nil {
			t.Errorf("Query(%s) = %v, %v; want an error naming %q", tc.id, asks, err, tc.want)
		}
	}
	for i := range core.MaxQueriesPending {
		if _, err := s.Query(fmt.Sprintf("w%d", i), []string{"alice"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Query("over", []string{"alice"}); !errors.Is(err, core.ErrQueriesPending) || !strings.Contains(err.Error(), "at most 4") {
		t.Fatalf("a query over the pending bound: %v", err)
	}
	s.SnapshotPart("w0", "alice", true, state("alice", 3, messages.Status_online))
	if _, err := s.Query("next", []string{"alice"}); err != nil {
		t.Fatalf("a query after one was answered: %v", err)
	}
	// A membership change: the waiting queries are dropped, their slots free.
	if ids := s.DropQueries(); !slices.Equal(ids, []string{"next", "w1", "w2", "w3"}) || s.Queries() != 0 {
		t.Fatalf("DropQueries = %v, %d left", ids, s.Queries())
	}
	if got := s.SnapshotPart("w1", "alice", true, state("alice", 3, messages.Status_online)); got != nil {
		t.Fatalf("a dropped query was answered: %v", got)
	}
	if _, err := s.Subscribe("s1", []string{"alice"}, messages.Tier(7)); err == nil || !strings.Contains(err.Error(), "tier 7: must be realtime or batched") {
		t.Fatalf("unknown tier: %v", err)
	}
	if s.Pending() != 0 || len(s.Targets()) != 0 {
		t.Fatal("a refused request left something behind")
	}
}

// Degraded, a sink keeps its batched targets' latest changes, pushed or
// answered to a query, and sends nothing of them; realtime targets go on.
// Restored, it sends restored and a snapshot of the latest it knows,
// never older than what the device got.
func TestSinkDegradeAndRestore(t *testing.T) {
	on, off := messages.Status_online, messages.Status_offline
	s := core.NewSink()
	if s.Degrade() != nil {
		t.Fatal("a sink without batched targets was degraded")
	}
	subscribed(t, s, "s1", messages.Tier_realtime, state("alice", 1, on))
	subscribed(t, s, "s2", messages.Tier_batched, state("bob", 1, on), state("carol", 1, on))
	s.Event(state("bob", 2, off)) // merged, waiting for its window
	if got := s.Degrade(); !slices.Equal(got, []string{"bob", "carol"}) || s.Degrade() != nil {
		t.Fatalf("Degrade = %v, want bob and carol once", got)
	}
	if s.Due() != 0 || s.Flush() != nil {
		t.Fatal("a degraded sink flushes")
	}
	if got := kinds(s.Event(state("alice", 2, off))); !slices.Equal(got, []string{"presence alice@2"}) {
		t.Fatalf("a realtime target while degraded: %v", got)
	}
	s.Event(state("bob", 3, on))
	if _, err := s.Query("q1", []string{"carol"}); err != nil {
		t.Fatal(err)
	}
	s.SnapshotPart("q1", "carol", true, state("carol", 5, off)) // the device pulled it
	s.Event(state("carol", 4, on))                              // older than the pull: not news
	got := s.Restore()
	if len(got) != 2 || got[0].GetRestored() == nil || got[1].GetSnapshot().GetRequestId() != core.RestoredID {
		t.Fatalf("Restore = %v, want restored then the snapshot", got)
	}
	var ps []string
	for _, p := range got[1].GetSnapshot().GetPresences() {
		ps = append(ps, fmt.Sprintf("%s@%d %v", p.GetUser(), p.GetVersion(), p.GetStatus()))
	}
	if want := []string{"bob@3 online", "carol@5 offline"}; !slices.Equal(ps, want) {
		t.Fatalf("restored snapshot %v, want %v", ps, want)
	}
	if s.Restore() != nil || s.Due() != 0 {
		t.Fatal("a second Restore sent again, or changes stayed due")
	}
	s.Event(state("bob", 4, off))
	if got := batchOf(s.Flush()); got != "batch[bob@4 offline]" {
		t.Fatalf("pushed again after the restore: %q", got)
	}
}

// versions names a frame list's presences: "user@version" each, in order.
func versions(fs []*messages.Frame) string {
	var out []string
	for _, f := range fs {
		ps := f.GetPresenceBatch().GetPresences()
		ps = append(ps, f.GetSnapshot().GetPresences()...)
		if p := f.GetPresence(); p != nil {
			ps = append(ps, p)
		}
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s@%d", p.GetUser(), p.GetVersion()))
		}
	}
	return strings.Join(out, ",")
}

// A target's versions never go back on the wire, whichever path carried
// the newer one (docs/protocol.md, "Versions"): a batched change older
// than a query's answer sent after a restore is not flushed; a realtime
// change older than a query's answer is dropped; a query's or a
// subscribe's answer older than what was pushed carries what was pushed.
func TestSinkVersionsNeverGoBack(t *testing.T) {
	on, off := messages.Status_online, messages.Status_offline
	s := core.NewSink()
	subscribed(t, s, "s1", messages.Tier_batched, state("bob", 1, on))
	s.Degrade()
	if _, err := s.Query("q1", []string{"bob"}); err != nil { // pulled while degraded ...
		t.Fatal(err)
	}
	if got := versions(s.Restore()); got != "bob@1" {
		t.Fatalf("restored snapshot %q", got)
	}
	if got := versions(s.SnapshotPart("q1", "bob", true, state("bob", 7, off))); got != "bob@7" { // ... answered after the restore
		t.Fatalf("the pull's answer %q", got)
	}
	s.Event(state("bob", 6, off)) // pushed before the answer, merged after it
	if got := batchOf(s.Flush()); got != "" {
		t.Fatalf("a batched change older than the answer was flushed: %q", got)
	}
	s.Event(state("bob", 8, on))
	if got := batchOf(s.Flush()); got != "batch[bob@8 online]" {
		t.Fatalf("the next change: %q", got)
	}

	subscribed(t, s, "s2", messages.Tier_realtime, state("alice", 1, on))
	if _, err := s.Query("q2", []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	s.SnapshotPart("q2", "alice", true, state("alice", 5, off))
	for _, v := range []uint64{4, 5} {
		if got := s.Event(state("alice", v, off)); got != nil {
			t.Fatalf("alice@%d after the answer alice@5 was sent: %q", v, versions(got))
		}
	}
	if got := versions(s.Event(state("alice", 9, on))); got != "alice@9" {
		t.Fatalf("the next change: %q", got)
	}
	if _, err := s.Query("q3", []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	if got := versions(s.SnapshotPart("q3", "alice", true, state("alice", 8, off))); got != "alice@9" {
		t.Fatalf("a query answered older than what was pushed: %q, want alice@9", got)
	}
	if _, err := s.Subscribe("s3", []string{"alice"}, messages.Tier_realtime); err != nil {
		t.Fatal(err)
	}
	if got := versions(s.SnapshotPart("s3", "alice", true, state("alice", 8, off))); got != "alice@9" {
		t.Fatalf("subscribed again, answered older than what was pushed: %q, want alice@9", got)
	}
}
