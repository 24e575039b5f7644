package cluster

import (
	"sync"
	"testing"
	"time"

	"github.com/presence-im/presence/internal/poll"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(),
		// Upstream, after proto.actor's Cluster.Shutdown: grpc client
		// connections to a dead member keep reconnecting, and proto.actor's
		// gossip log throttles outlive it. Everything of ours must end.
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreTopFunction("google.golang.org/grpc.(*addrConn).resetTransport"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.NewGossipActor.NewThrottleWithLogger.func2.1"),
		// and the dead-letter log's throttle (a period's ticker after a
		// dead letter, sent to a member as it stopped).
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		// An endpoint writer to a member that shut down retries its dial
		// after a sleep (upstream; the benchmark's members stop together).
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/remote.(*endpointWriter).initialize"),
	)
}

// recorder keeps the events one node saw.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) add(ev Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) find(kind EventKind, id string) (Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if ev.Kind == kind && ev.Member.ID == id {
			return ev, true
		}
	}
	return Event{}, false
}

func startGossip(t *testing.T, name string, join ...string) (*Gossip, *recorder) {
	t.Helper()
	r := &recorder{}
	g, err := NewGossip(GossipConfig{Name: name, Bind: "127.0.0.1:0", Join: join, Preset: "fast", Key: []byte("0123456789abcdef"),
		Meta: Meta{Actor: "127.0.0.1:9" + name[len(name)-1:], Kinds: []string{"lease", "view"}}})
	if err != nil {
		t.Fatal(err)
	}
	g.Subscribe(r.add)
	return g, r
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return poll.Until(t, within, 5*time.Millisecond, what, cond)
}

// Three members find each other with their metadata; a crashed member is
// declared failed within FailureDetection, a leaving one is seen as left.
func TestGossipJoinFailLeave(t *testing.T) {
	a, ra := startGossip(t, "n1")
	b, _ := startGossip(t, "n2", a.Addr())
	c, rc := startGossip(t, "n3", a.Addr())
	waitUntil(t, 5*time.Second, "3 members everywhere", func() bool {
		return len(a.Members()) == 3 && len(b.Members()) == 3 && len(c.Members()) == 3
	})
	if m, ok := c.Meta("n2"); !ok || m.Actor != "127.0.0.1:92" || len(m.Kinds) != 2 {
		t.Fatalf("n3 sees n2's meta %+v", m)
	}

	killed := time.Now()
	b.Shutdown() // a crash: no leave message
	down := time.Now()
	bound := FailureDetection("fast", 3)
	took := waitUntil(t, bound+time.Second, "n2 failed at n1", func() bool { _, ok := ra.find(EventFailed, "n2"); return ok })
	t.Logf("crash detected after %v (bound %v)", took, bound)
	if took > bound {
		t.Fatalf("crash detected after %v, bound %v", took, bound)
	}
	// The last sign of life is from before the crash ended (a packet n2
	// sent as it shut down may be read a moment later), and at most a
	// couple of probe rounds (2 members x 200 ms) before it began: not
	// the detection.
	ev, _ := ra.find(EventFailed, "n2")
	late := ev.LastHeard.Sub(down)
	if gap := killed.Sub(ev.LastHeard); ev.LastHeard.IsZero() || late > 100*time.Millisecond || gap > 4*200*time.Millisecond {
		t.Fatalf("n2 last heard %v before its crash began, %v after it ended (zero: %v), want within 800 ms before and 100 ms after", gap, late, ev.LastHeard.IsZero())
	} else {
		t.Logf("n2 last heard %v before its crash", gap)
	}
	if _, ok := rc.find(EventLeft, "n2"); ok {
		t.Fatal("a crash was reported as a graceful leave")
	}

	if err := c.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Second, "n3 left at n1", func() bool { _, ok := ra.find(EventLeft, "n3"); return ok })
	a.Shutdown()
}

// A wrong cluster key keeps a node out.
func TestGossipKeyMismatch(t *testing.T) {
	a, _ := startGossip(t, "n1")
	defer a.Shutdown()
	_, err := NewGossip(GossipConfig{Name: "x", Bind: "127.0.0.1:0", Join: []string{a.Addr()}, Preset: "fast", Key: []byte("fedcba9876543210")})
	if err == nil {
		t.Fatal("joined with the wrong key")
	}
}

func TestFailureDetectionFormula(t *testing.T) {
	// LAN: 1 s probe + 0.5 s timeout + 4 x 1 x 1 s x 6.
	if got := FailureDetection("seed", 3); got != 25500*time.Millisecond {
		t.Fatalf("seed, 3 nodes: %v", got)
	}
	if FailureDetection("seed", 100) <= FailureDetection("seed", 3) {
		t.Fatal("suspicion must grow with log10 of the cluster size")
	}
}

// Gone remembers the actor address of a member declared dead or left until
// an alive member holds it again, and forgets it after GoneFor.
func TestGoneActorAddresses(t *testing.T) {
	g := &Gossip{gone: map[string]time.Time{}}
	t0 := time.Now()
	ev := func(id, actor string, s State, at time.Time) Event {
		return Event{At: at, Meta: Meta{Actor: actor}, Member: Member{ID: id, State: s}}
	}
	g.noteGone(ev("n2", "10.0.0.2:7000", Alive, t0))
	if g.Gone("10.0.0.2:7000") {
		t.Fatal("an alive member's address is gone")
	}
	g.noteGone(ev("n2", "10.0.0.2:7000", Dead, t0))
	g.noteGone(ev("n3", "10.0.0.3:7000", Left, t0))
	if !g.Gone("10.0.0.2:7000") || !g.Gone("10.0.0.3:7000") {
		t.Fatal("a dead or left member's address is not gone")
	}
	g.noteGone(ev("n2", "10.0.0.2:7001", Alive, t0.Add(time.Second))) // n2's next incarnation
	if !g.Gone("10.0.0.2:7000") || g.Gone("10.0.0.2:7001") {
		t.Fatal("n2's new incarnation: the old address must stay gone, the new one not")
	}
	g.noteGone(ev("n3", "10.0.0.3:7000", Alive, t0.Add(time.Second))) // back on the same port
	if g.Gone("10.0.0.3:7000") {
		t.Fatal("an address an alive member holds again is still gone")
	}
	g.noteGone(ev("n4", "10.0.0.4:7000", Dead, t0.Add(GoneFor+time.Second)))
	if g.Gone("10.0.0.2:7000") || !g.Gone("10.0.0.4:7000") {
		t.Fatalf("after GoneFor: %v, want only n4's address", g.gone)
	}
}
