package cluster

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

// A member that refuted its death (a flap) fences once a member alive
// lists its actor-system id as blocked (the declaring member's word), or
// once memberlist here refuted a verdict of death after RefuteGrace; not
// for another member's id, a dead member's list, or a refutation at its
// join (an earlier incarnation's death, heard from the seeds).
func TestDeclaredDeadFences(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	check := func(g *Gossip) FenceReason {
		t.Helper()
		w := FenceWatch{Gossip: g, Preset: "fast"}
		reason, detail, _ := w.check(now, now.Add(-100*time.Millisecond))
		if reason != "" && detail == "" {
			t.Fatal("a fence without a reason given")
		}
		return reason
	}
	table := func(n2 State, blocked ...string) *Gossip {
		g := members(now, map[string]State{"n2": n2, "n3": Alive}, nil)
		g.self.ID = "id-n1"
		g.metas["n2"] = Meta{Up: 2, Blocked: blocked}
		return g
	}
	if r := check(table(Alive)); r != "" {
		t.Fatalf("nobody blocked n1: %q, want no fence", r)
	}
	if r := check(table(Alive, "id-other")); r != "" {
		t.Fatalf("n2 blocked another id: %q, want no fence", r)
	}
	if r := check(table(Dead, "id-n1")); r != "" {
		t.Fatalf("a dead member's list: %q, want no fence", r)
	}
	if r := check(table(Alive, "id-a", "id-n1")); r != FenceDeclared {
		t.Fatalf("n2 lists n1's id as blocked: %q, want %q", r, FenceDeclared)
	}

	g := table(Alive)
	g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	w := &memberlistLog{l: g.log, refuted: g.noteRefuted}
	refute := func() { _, _ = w.Write([]byte("[WARN] memberlist: Refuting a dead message (from: n2)")) }
	g.member.Store(time.Now().UnixNano())
	refute() // at its join: an earlier incarnation's death
	if r := check(g); r != "" {
		t.Fatalf("a refutation right after joining: %q, want no fence", r)
	}
	_, _ = w.Write([]byte("[WARN] memberlist: Refuting a suspect message (from: n2)"))
	g.member.Store(time.Now().Add(-2 * RefuteGrace).UnixNano())
	if r := check(g); r != "" {
		t.Fatalf("a refuted suspicion: %q, want no fence", r)
	}
	refute()
	if r := check(g); r != FenceDeclared {
		t.Fatalf("a refutation of a death once a member: %q, want %q", r, FenceDeclared)
	}
}

// The ids a member lists as blocked (SetBlocked) reach the member they
// name through the gossip metadata: it learns it was declared dead; and
// an empty list takes the word back.
func TestBlockedReachesTheMemberNamed(t *testing.T) {
	a, _ := startGossip(t, "n1")
	b, _ := startGossip(t, "n2", a.Addr())
	defer a.Shutdown()
	defer b.Shutdown()
	b.metaMu.Lock()
	b.self.ID = "id-n2"
	b.metaMu.Unlock()
	waitUntil(t, 5*time.Second, "2 members", func() bool { return len(a.Members()) == 2 && len(b.Members()) == 2 })
	if by, ok := b.DeclaredDead(); ok {
		t.Fatalf("declared dead by %s before anyone said so", by)
	}
	a.SetBlocked([]string{"id-n2"})
	waitUntil(t, 5*time.Second, "n2 hears n1 blocked it", func() bool { by, ok := b.DeclaredDead(); return ok && by == "n1" })
	a.SetBlocked(nil)
	waitUntil(t, 5*time.Second, "n1's list empty again at n2", func() bool { _, ok := b.DeclaredDead(); return !ok })
	a.blockMu.Lock() // the last update was sent
	a.blockMu.Unlock()
}
