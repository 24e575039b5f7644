package cluster

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// members builds a gossip table as node n1 sees it, without the network.
// Each member's gossip address is its name, or addr[name] when given.
func members(now time.Time, states map[string]State, since map[string]time.Duration, addr ...map[string]string) *Gossip {
	g := &Gossip{conf: &memberlist.Config{Name: "n1"}, start: now, self: Meta{Up: 1}, members: map[string]Member{"n1": {ID: "n1", State: Alive, Addresses: []string{"n1"}}},
		metas: map[string]Meta{}}
	for id, s := range states {
		g.metas[id] = Meta{Up: 2} // n1 is the oldest
		a := id
		if len(addr) > 0 && addr[0][id] != "" {
			a = addr[0][id]
		}
		g.members[id] = Member{ID: id, State: s, Since: now.Add(-since[id]), Addresses: []string{a}}
	}
	return g
}

func TestFenceCheck(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tick := 100 * time.Millisecond
	for _, tc := range []struct {
		name   string
		states map[string]State
		since  map[string]time.Duration
		gap    time.Duration
		want   FenceReason // "" : no fence
	}{
		{"all alive", map[string]State{"n2": Alive, "n3": Alive}, nil, tick, ""},
		{"one of three dead: the majority goes on", map[string]State{"n2": Dead, "n3": Alive}, nil, tick, ""},
		{"both others dead: minority", map[string]State{"n2": Dead, "n3": Dead}, nil, tick, FenceMinority},
		{"two of four with the oldest: the tie is won", map[string]State{"n2": Dead, "n3": Dead, "n4": Alive}, nil, tick, ""},
		{"one of four: minority", map[string]State{"n2": Dead, "n3": Dead, "n4": Dead}, nil, tick, FenceMinority},
		{"two: the oldest serves on", map[string]State{"n2": Dead}, nil, tick, ""},
		{"a member that left does not count", map[string]State{"n2": Left, "n3": Alive}, nil, tick, ""},
		{"dead long ago is forgotten", map[string]State{"n2": Dead, "n3": Alive, "n4": Dead}, map[string]time.Duration{"n2": time.Hour}, tick, ""},
		{"paused past the earliest detection", map[string]State{"n2": Alive, "n3": Alive}, nil, 3 * time.Second, FencePaused},
		{"a short stall is not a pause", map[string]State{"n2": Alive, "n3": Alive}, nil, 900 * time.Millisecond, ""},
		{"alone: never fenced", nil, nil, time.Minute, ""},
		{"dead at an address an alive member now holds: restarted, not lost",
			map[string]State{"c": Dead, "c2": Alive, "b": Dead}, nil, tick, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := FenceWatch{Gossip: members(now, tc.states, tc.since, map[string]string{"c2": "c"}), Preset: "fast"}
			reason, detail, base := w.check(now, now.Add(-tc.gap))
			if reason != tc.want {
				t.Fatalf("check = %q %q (base %v), want %q", reason, detail, base, tc.want)
			}
			if reason != "" && detail == "" {
				t.Fatal("a fence without a reason given")
			}
		})
	}
}

// The pause threshold is memberlist's earliest verdict, never under a
// second: fast 3 members 0.5 s -> 1 s; seed (LAN) 3 members 4.5 s.
func TestMinDetection(t *testing.T) {
	if got := MinDetection("fast", 3); got != 500*time.Millisecond {
		t.Fatalf("fast: %v", got)
	}
	if got := MinDetection("seed", 3); got != 4500*time.Millisecond {
		t.Fatalf("seed: %v", got)
	}
	if MinDetection("fast", 100) <= MinDetection("fast", 3) {
		t.Fatal("more members must take longer")
	}
}

// A member the others declared dead that refutes it (memberlist's "Refuting
// a dead message", e.g. one starved for less than the pause threshold
// right after it rejoined) fences: the others reclaimed its leases and
// proto.actor blocked its actor system id, so it is left out of their
// placement while its own still names itself (a soak run: its lease
// expired a device the others held elsewhere, and its down was taken once
// it was alive again). A refute while it joins (its old incarnation's
// death) is not a verdict on this one.
func TestFenceOnARefutedDeath(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := members(now, map[string]State{"n2": Alive, "n3": Alive}, nil)
	w := FenceWatch{Gossip: g, Preset: "fast"}
	logw := &memberlistLog{l: discard(), refuted: g.refutedDeath}
	refute := func() { _, _ = logw.Write([]byte("[WARN] memberlist: Refuting a dead message (from: n2)")) }
	refute() // while joining
	_, _ = logw.Write([]byte("[WARN] memberlist: Refuting a suspect message (from: n2)"))
	g.joinedAt.Store(true)
	_, _ = logw.Write([]byte("[WARN] memberlist: Refuting a suspect message (from: n2)"))
	if reason, detail, _ := w.check(now, now.Add(-100*time.Millisecond)); reason != "" {
		t.Fatalf("fenced on a refute while joining or on a suspicion: %q %q", reason, detail)
	}
	refute()
	reason, detail, _ := w.check(now, now.Add(-100*time.Millisecond))
	if reason != FenceDeclaredDead || !strings.Contains(detail, "refuted a death verdict") {
		t.Fatalf("check = %q %q, want %q", reason, detail, FenceDeclaredDead)
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A member declared dead here that comes back alive under the same actor
// system id (it refuted the verdict, or its refute of the suspicion came
// after it) is blocked by proto.actor here and left out of the placement:
// this node names its id in its metadata (Meta.Blocked) and keeps
// dropping what it sends; the member, seeing its own id named by an alive
// member, fences (a soak run: n3 declared n2 dead and took it back at
// once, n2 heard of no verdict, and its lease expired a device n3 held).
func TestRevenantIsNamedAndFences(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := members(now, map[string]State{"n2": Alive, "n3": Alive}, nil)
	g.gone, g.log = map[string]time.Time{}, discard()
	n2 := Meta{ID: "sys-n2", Actor: "a2"}
	g.metas["n2"] = n2
	ev := func(kind EventKind, s State, m Meta) Event {
		return Event{Kind: kind, Meta: m, At: now, Member: Member{ID: "n2", State: s, Addresses: []string{"n2", m.Actor}}}
	}
	g.apply(ev(EventFailed, Dead, n2))
	if g.Blocked() != nil {
		t.Fatalf("blocked %v while dead", g.Blocked())
	}
	g.apply(ev(EventJoined, Alive, n2))
	if got := g.Blocked(); len(got) != 1 || got[0] != "sys-n2" || !g.Gone("a2") {
		t.Fatalf("revenant: blocked %v, gone %v; want [sys-n2], its messages dropped", got, g.Gone("a2"))
	}
	restarted := Meta{ID: "sys-n2b", Actor: "a2b"}
	g.apply(ev(EventJoined, Alive, restarted))
	if g.Blocked() != nil || g.Gone("a2b") {
		t.Fatalf("a new incarnation: blocked %v, gone %v", g.Blocked(), g.Gone("a2b"))
	}

	// On the revenant's side: an alive member names its id.
	z := members(now, map[string]State{"n2": Alive, "n3": Alive}, nil)
	z.self.ID = "sys-n1"
	w := FenceWatch{Gossip: z, Preset: "fast"}
	if reason, _, _ := w.check(now, now.Add(-100*time.Millisecond)); reason != "" {
		t.Fatalf("fenced unnamed: %q", reason)
	}
	z.metas["n3"] = Meta{ID: "sys-n3", Blocked: []string{"sys-n1"}}
	if reason, detail, _ := w.check(now, now.Add(-100*time.Millisecond)); reason != FenceDeclaredDead || !strings.Contains(detail, "n3") {
		t.Fatalf("check = %q %q, want %q naming n3", reason, detail, FenceDeclaredDead)
	}
}

// A fenced incarnation waiting to serve, declared dead on a stale verdict
// (its old incarnation's, gossiped at the heal by a member it had not met
// yet), held nothing here and proto.actor never blocked it: alive again
// under the same id, whether it served meanwhile or not, it is no
// revenant, nobody names it, and what it sends is taken.
func TestFencedIncarnationDeclaredDeadIsNoRevenant(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, served := range []bool{false, true} {
		g := members(now, map[string]State{"n2": Alive, "n3": Alive}, nil)
		g.gone, g.log = map[string]time.Time{}, discard()
		waiting := Meta{ID: "sys-n2", Actor: "a2", Fenced: true}
		g.metas["n2"] = waiting
		ev := func(kind EventKind, s State, m Meta) Event {
			return Event{Kind: kind, Meta: m, At: now, Member: Member{ID: "n2", State: s, Addresses: []string{"n2", m.Actor}}}
		}
		g.apply(ev(EventFailed, Dead, waiting))
		if !g.Gone("a2") {
			t.Fatalf("declared dead: its messages not dropped")
		}
		back := waiting
		back.Fenced = !served
		g.apply(ev(EventJoined, Alive, back))
		if g.Blocked() != nil || g.Gone("a2") {
			t.Fatalf("served %v: blocked %v, gone %v; want no revenant", served, g.Blocked(), g.Gone("a2"))
		}
	}
}

// A member the table holds alive and unheard for longer than two probe
// rounds and a probe timeout is silent; one heard within that, one
// declared dead and this node itself are not.
func TestSilentMember(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := members(now, map[string]State{"n2": Alive, "n3": Alive, "n4": Dead}, nil)
	g.conf.ProbeInterval, g.conf.ProbeTimeout = 200*time.Millisecond, 100*time.Millisecond
	limit := 2*2*g.conf.ProbeInterval + g.conf.ProbeTimeout // three alive: a round probes the two others
	g.heard = map[string]time.Time{"n1": now.Add(-time.Hour), "n2": now, "n3": now.Add(-limit), "n4": now.Add(-time.Hour)}
	if g.Silent(now) {
		t.Fatalf("silent with n3 heard %v ago (limit %v), n4 dead, itself never probed", limit, limit)
	}
	if !g.Silent(now.Add(time.Millisecond)) {
		t.Fatalf("n3 unheard for %v: not silent", limit+time.Millisecond)
	}
	for health, want := range map[int]time.Duration{1: 2 * limit, 7: 2 * limit} { // degraded: twice, at most
		if got := silentAfter(g.conf, 3, health); got != want {
			t.Fatalf("silentAfter at health score %d = %v, want %v", health, got, want)
		}
	}
}
