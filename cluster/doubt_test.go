package cluster

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/memberlist"
)

// answering is a ping that answers for the members named in it.
type answering struct{ ids sync.Map }

func (a *answering) set(ids ...string) {
	a.ids.Clear()
	for _, id := range ids {
		a.ids.Store(id, true)
	}
}

func (a *answering) ping(id, _ string) bool { _, ok := a.ids.Load(id); return ok }

// doubting is a member table as n1 sees it (members) that pings through a.
func doubting(now time.Time, states map[string]State, a *answering) *Gossip {
	g := members(now, states, nil)
	g.preset, g.heard, g.done, g.start = "fast", map[string]time.Time{}, make(chan struct{}), time.Now()
	g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	g.doubt.pinger = a
	return g
}

// A death verdict is confirmed only by enough of the others answering
// after it: the resolver's rule over the quorum base, each member the
// table holds alive counted only if it answers a ping or memberlist
// acknowledged a probe of it since the verdict.
func TestConfirmNeedsEnoughAnswers(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	since := now.Add(-300 * time.Millisecond) // the verdict
	for _, tc := range []struct {
		name   string
		states map[string]State
		answer []string
		heard  map[string]time.Time
		serve  bool
	}{
		{"3 members, the other alive one answers", map[string]State{"n2": Dead, "n3": Alive}, []string{"n3"}, nil, true},
		{"3 members, cut off: the other alive one is silent", map[string]State{"n2": Dead, "n3": Alive}, nil, nil, false},
		{"silent to the ping but its probe was acknowledged since", map[string]State{"n2": Dead, "n3": Alive}, nil,
			map[string]time.Time{"n3": since.Add(time.Millisecond)}, true},
		{"its last acknowledged probe is older than the verdict", map[string]State{"n2": Dead, "n3": Alive}, nil,
			map[string]time.Time{"n3": since.Add(-time.Millisecond)}, false},
		{"2 members: the oldest wins the tie with nobody to ask", map[string]State{"n2": Dead}, nil, nil, true},
		{"5 members, 2 of them reached", map[string]State{"n2": Dead, "n3": Alive, "n4": Alive, "n5": Alive}, []string{"n3"}, nil, false},
		{"5 members, 3 of them reached", map[string]State{"n2": Dead, "n3": Alive, "n4": Alive, "n5": Alive}, []string{"n3", "n4"}, nil, true},
		{"a dead member is not asked", map[string]State{"n2": Dead, "n3": Dead}, []string{"n2", "n3"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &answering{}
			a.set(tc.answer...)
			g := doubting(now, tc.states, a)
			for id := range tc.states {
				g.heard[id] = since.Add(-time.Hour) // joined long ago
			}
			for id, at := range tc.heard {
				g.heard[id] = at
			}
			if v, base := g.confirm(now, since); v.Serve != tc.serve {
				t.Fatalf("confirm = %v (%s), base %v; want serve %v", v.Serve, v, base, tc.serve)
			}
			for _, id := range tc.answer {
				if at, ok := g.heard[id]; tc.states[id] == Alive && (!ok || !at.After(since)) {
					t.Fatalf("%s answered a ping and was not heard from", id)
				}
			}
		})
	}
}

// The doubt begins with the verdict, holds while too few answer, ends at
// the first round that confirms, or after the failure detection at the
// latest; the loop ends with it, and with the gossip.
func TestDoubtHoldsUntilConfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &answering{}
		g := doubting(time.Now(), map[string]State{"n2": Dead, "n3": Alive}, a)
		g.doubtFrom()
		if g.Doubt() == 0 {
			t.Fatal("not in doubt right after a death verdict")
		}
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if g.Doubt() == 0 {
			t.Fatal("doubt cleared while the only other alive member is silent")
		}
		a.set("n3")
		time.Sleep(doubtTick)
		synctest.Wait()
		if g.Doubt() > 0 || g.doubt.loop.Load() {
			t.Fatalf("n3 answers: in doubt %v, loop running %v", g.Doubt() > 0, g.doubt.loop.Load())
		}

		// Nobody answers: the doubt gives up after the failure detection.
		a.set()
		g.doubtFrom()
		fd := FailureDetection("fast", 3)
		time.Sleep(fd - doubtTick)
		synctest.Wait()
		if g.Doubt() == 0 {
			t.Fatalf("doubt cleared before the failure detection (%v)", fd)
		}
		time.Sleep(3 * doubtTick)
		synctest.Wait()
		if g.Doubt() > 0 {
			t.Fatalf("still in doubt %v after the verdict (failure detection %v)", fd+2*doubtTick, fd)
		}

		// Serving on the lease: a round in which its holder is this node or
		// answers confirms, whatever the majority.
		a.set()
		g.LeaseServes("n1")
		g.doubtFrom()
		if g.Doubt() > 0 {
			t.Fatal("in doubt while serving on its own lease")
		}
		g.LeaseServes("")
		g.doubtFrom()
		g.LeaseServes("n1") // it takes the lease while in doubt: no round to wait for
		if g.Doubt() > 0 {
			t.Fatal("still in doubt once it holds the lease")
		}
		synctest.Wait()
		g.LeaseServes("n3")
		g.doubtFrom()
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if g.Doubt() == 0 {
			t.Fatal("doubt cleared while the lease's holder is silent")
		}
		a.set("n3")
		time.Sleep(doubtTick)
		synctest.Wait()
		if g.Doubt() > 0 {
			t.Fatal("in doubt though the lease's holder answers")
		}
		g.LeaseServes("")
		a.set()
		g.doubtFrom()
		close(g.done) // the gossip stops: the loop ends, the doubt with it
		synctest.Wait()
		if g.Doubt() > 0 || g.doubt.loop.Load() {
			t.Fatalf("after the gossip stopped: in doubt %v, loop running %v", g.Doubt() > 0, g.doubt.loop.Load())
		}
	})
}

// cutTransport drops what its member sends to the addresses cut off, as a
// firewall would (every member of a partition test drops its side).
type cutTransport struct {
	memberlist.Transport
	cut atomic.Pointer[map[string]bool]
}

func (c *cutTransport) off(addr string) bool {
	m := c.cut.Load()
	return m != nil && (*m)[addr]
}

func (c *cutTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if c.off(addr) {
		return time.Now(), nil
	}
	return c.Transport.WriteTo(b, addr)
}

func (c *cutTransport) DialTimeout(addr string, d time.Duration) (net.Conn, error) {
	if c.off(addr) {
		return nil, errors.New("cut off")
	}
	return c.Transport.DialTimeout(addr, d)
}

func startCuttable(t *testing.T, name string, join ...string) (*Gossip, *cutTransport) {
	t.Helper()
	ct := &cutTransport{}
	g, err := newGossip(GossipConfig{Name: name, Bind: "127.0.0.1:0", Join: join, Preset: "fast", Key: []byte("0123456789abcdef"),
		Meta: Meta{Actor: "127.0.0.1:9" + name[len(name)-1:]}}, func(nt memberlist.Transport) memberlist.Transport {
		ct.Transport = nt
		return ct
	})
	if err != nil {
		t.Fatal(err)
	}
	return g, ct
}

// The lone side of a real 2+1 split (memberlist over a transport that drops
// across the cut) is in doubt from its first death verdict to its last,
// so it gives no verdict by time before it fences; the majority's doubt
// ends at its first round of pings.
func TestCutOffNodeDoubtsUntilItsLastVerdict(t *testing.T) {
	a, ta := startCuttable(t, "n1")
	b, tb := startCuttable(t, "n2", a.Addr())
	c, tc := startCuttable(t, "n3", a.Addr())
	defer func() { a.Shutdown(); b.Shutdown(); c.Shutdown() }()
	waitUntil(t, 5*time.Second, "3 members everywhere", func() bool {
		return len(a.Members()) == 3 && len(b.Members()) == 3 && len(c.Members()) == 3
	})

	var mu sync.Mutex
	doubts := map[string][]bool{} // at each failure a member heard of, whether it was in doubt
	failed := map[string]int{}
	for _, g := range []*Gossip{a, b, c} {
		g.Subscribe(func(ev Event) {
			if ev.Kind == EventFailed {
				mu.Lock()
				doubts[g.conf.Name] = append(doubts[g.conf.Name], g.Doubt() > 0)
				failed[g.conf.Name]++
				mu.Unlock()
			}
		})
	}
	count := func(id string) int { mu.Lock(); defer mu.Unlock(); return failed[id] }

	ta.cut.Store(&map[string]bool{b.Addr(): true, c.Addr(): true})
	tb.cut.Store(&map[string]bool{a.Addr(): true})
	tc.cut.Store(&map[string]bool{a.Addr(): true})

	within := 2*FailureDetection("fast", 3) + time.Second
	waitUntil(t, within, "n1's first death verdict", func() bool { return count("n1") >= 1 })
	// From its first verdict to its second, n1 never leaves its doubt.
	for count("n1") < 2 {
		if a.Doubt() == 0 {
			t.Fatal("n1, cut off, left its doubt between its two death verdicts")
		}
		time.Sleep(2 * time.Millisecond)
	}
	// The majority: in doubt at n1's verdict, out of it a round later.
	for _, g := range []*Gossip{b, c} {
		id := g.conf.Name
		waitUntil(t, within, id+"'s verdict on n1", func() bool { return count(id) >= 1 })
		took := waitUntil(t, time.Second, id+" out of doubt", func() bool { return g.Doubt() == 0 })
		t.Logf("%s out of doubt %v after it saw n1's verdict", id, took)
	}
	// n1's subscribers heard of each verdict in doubt (the majority's may
	// hear of it confirmed already: its pings take a loopback round trip).
	mu.Lock()
	defer mu.Unlock()
	for i, d := range doubts["n1"] {
		if !d {
			t.Errorf("n1 heard of failure %d while not in doubt: the doubt must come first", i+1)
		}
	}
}

// The member table takes a death verdict and its doubt in one step (apply,
// under the gossip's lock), so that FenceWatch, reading the table and then
// the doubt, never sees the verdict without it; the delivery goroutine
// starts the loop that clears it.
func TestDeathVerdictComesWithItsDoubt(t *testing.T) {
	now := time.Now()
	g := members(now, map[string]State{"n2": Alive, "n3": Alive}, nil)
	g.gone, g.log = map[string]time.Time{}, discard()
	g.apply(Event{Kind: EventJoined, At: now, Member: Member{ID: "n3", State: Alive, Since: now}})
	if g.Doubt() > 0 {
		t.Fatal("in doubt after a join")
	}
	g.apply(Event{Kind: EventFailed, At: now, Member: Member{ID: "n3", State: Dead, Since: now}})
	if g.Doubt() == 0 || g.doubt.loop.Load() {
		t.Fatalf("after the verdict: in doubt %v, loop running %v; want in doubt, the loop left to the delivery goroutine", g.Doubt() > 0, g.doubt.loop.Load())
	}
}

// doubtFrom is what a death verdict does (apply, then deliver): the node in
// doubt, and the loop that clears it started.
func (g *Gossip) doubtFrom() {
	g.markDoubt()
	g.confirmDoubt()
}
