//go:build !race

// proto.actor's remote sets grpc's global logger on every start, which the
// race detector reports when two members share a process; the cluster tests
// of real presenced processes (one member each) run under -race instead.

package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/presence-im/presence/messages"
)

// whoami answers a ViewQuery with the name of the member it runs on.
type whoami struct{ member string }

func (w whoami) Receive(ctx actor.Context) {
	if q, ok := ctx.Message().(*messages.ViewQuery); ok {
		ctx.Respond(&messages.ViewState{User: q.GetUser() + "@" + w.member})
	}
}

type member struct {
	name string
	sys  *actor.ActorSystem
	c    *pcluster.Cluster
	p    *Provider
}

func startMember(t testing.TB, name string, key []byte, join ...string) *member {
	t.Helper()
	m, err := newMember(GossipConfig{Name: name, Bind: "127.0.0.1:0", Join: join, Preset: "fast", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newMember starts a proto.actor member with the kind "view" (whoami) over
// a provider of gc; it returns once the member started (a fenced
// incarnation's, gc.Rejoin, once it serves). onServe, if given, is Host's.
func newMember(gc GossipConfig, onServe ...func(*Provider)) (*member, error) {
	quiet := actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) })
	sys := actor.NewActorSystem(quiet)
	p := NewProvider(gc)
	for _, f := range onServe {
		p.Host(nil, nil, func() { f(p) })
	}
	kind := pcluster.NewKind("view", actor.PropsFromProducer(func() actor.Actor { return whoami{gc.Name} }))
	rcfg, err := RemoteConfig("127.0.0.1", 0, gc.Key)
	if err != nil {
		return nil, err
	}
	cfg := pcluster.Configure("presence-test", p, disthash.New(), rcfg,
		pcluster.WithKinds(kind), pcluster.WithRequestTimeout(2*time.Second))
	c := pcluster.New(sys, cfg)
	c.StartMember()
	return &member{gc.Name, sys, c, p}, nil
}

func (m *member) ask(identity string) (string, error) {
	res, err := m.c.Request(identity, "view", &messages.ViewQuery{User: identity})
	if err != nil {
		return "", err
	}
	return res.(*messages.ViewState).GetUser(), nil
}

// Two proto.actor members over the gossip provider reach each other's
// virtual actors; when one crashes, its identities come back on the other.
func TestProviderGrainsMoveOnCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two cluster members")
	}
	a := startMember(t, "n1", nil)
	b := startMember(t, "n2", nil, a.p.Gossip().Addr())
	waitUntil(t, 5*time.Second, "both in each gossip", func() bool {
		return len(a.p.Gossip().Members()) == 2 && len(b.p.Gossip().Members()) == 2
	})
	onB := ""
	waitUntil(t, 5*time.Second, "an identity answered by n2", func() bool {
		for i := range 50 {
			id := fmt.Sprintf("u%d", i)
			if got, err := a.ask(id); err == nil && got == id+"@n2" {
				onB = id
				return true
			}
		}
		return false
	})
	if onB == "" {
		t.Fatal("no identity of 50 hashed to n2")
	}
	b.p.Gossip().Shutdown() // n2 crashes: gossip stops, its actors go unanswered
	b.c.Shutdown(false)
	waitUntil(t, FailureDetection("fast", 2)+2*time.Second, onB+" re-activated on n1", func() bool {
		got, err := a.ask(onB)
		return err == nil && got == onB+"@n1"
	})
	a.c.Shutdown(true)
}

// A fenced node's new incarnation is in the others' gossip while it waits
// to serve, its own placement not yet running: the others' provider
// places no identity on it (placeable, Provider.publish) until the update
// that says it serves, and then does.
func TestProviderPlacesAFencedIncarnationOnceItServes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two cluster members")
	}
	a := startMember(t, "n1", nil)
	serve, _ := fencedMember(t, a)
	var actorAddr string
	waitUntil(t, 5*time.Second, "n2 in n1's gossip, fenced", func() bool {
		meta, ok := a.p.Gossip().Meta("n2")
		actorAddr = meta.Actor
		return ok && meta.Fenced && meta.Actor != ""
	})
	owned := func() int {
		n := 0
		for i := range 200 {
			if a.p.Owner("view", fmt.Sprintf("u%d", i)) == actorAddr {
				n++
			}
		}
		return n
	}
	time.Sleep(500 * time.Millisecond) // a few gossip rounds: n1 publishes on each event
	if n := owned(); n != 0 {
		t.Fatalf("n1 places %d of 200 identities on n2 while it waits to serve", n)
	}
	serve()
	waitUntil(t, 5*time.Second, "identities placed on n2 once it serves", func() bool { return owned() > 0 })
}

// A fenced incarnation is placed on from the moment it tells the others it
// serves, seconds after its gossip started and before StartMember returns:
// Host's onServe runs then (the node counts it as a membership change, so
// views activated there wait for their devices), and from then on every
// identity it owns may have lived elsewhere (Moved). Counted from the
// gossip's start or from StartMember's return, views activated in between
// published false offlines at a partition's heal (the chaos soak).
func TestFencedIncarnationMovedFromItsServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two cluster members")
	}
	a := startMember(t, "n1", nil)
	type serveSeen struct {
		at    time.Time
		moved bool
	}
	serves := make(chan serveSeen, 4)
	serve, started := fencedMember(t, a, func(p *Provider) {
		serves <- serveSeen{time.Now(), p.Moved("view", "u1", time.Now().Add(-time.Millisecond))}
	})
	waitUntil(t, 5*time.Second, "n2 in n1's gossip, fenced", func() bool {
		meta, ok := a.p.Gossip().Meta("n2")
		return ok && meta.Fenced
	})
	select {
	case <-serves:
		t.Fatal("onServe ran while the incarnation waits, fenced")
	default:
	}
	released := time.Now()
	serve()
	var s serveSeen
	select {
	case s = <-serves:
	case <-time.After(5 * time.Second):
		t.Fatal("onServe did not run once the incarnation serves")
	}
	if s.at.Before(released) {
		t.Fatalf("onServe ran at %v, before the incarnation was let serve at %v", s.at, released)
	}
	if !s.moved {
		t.Fatal("Moved false when the incarnation begins to serve: what is activated there until StartMember returns is taken for new")
	}
	b := <-started
	if b == nil {
		t.FailNow()
	}
	for i := range 50 {
		if id := fmt.Sprint("u", i); !b.p.Moved("view", id, released) {
			t.Fatalf("%s: not moved since the serve", id)
		}
	}
}

// fencedMember starts n2 as a fenced node's new incarnation joining a's
// gossip, with a base of five it fenced on, of which it reaches itself and
// n1: no verdict lets it serve, only the operator, which serve stands for.
// The member comes on started once it serves (nil if it failed); both
// members are shut down at cleanup, also when a check fails while n2 waits.
func fencedMember(t *testing.T, a *member, onServe ...func(*Provider)) (serve func(), started <-chan *member) {
	alone := make(chan struct{})
	var once sync.Once
	serve = func() { once.Do(func() { close(alone) }) }
	out := make(chan *member, 1)
	done := make(chan *member, 1)
	t.Cleanup(func() {
		serve()
		if b := <-done; b != nil {
			b.c.Shutdown(true)
		}
		a.c.Shutdown(true)
	})
	go func() {
		r := &Rejoin{Base: []Voter{{ID: "n2"}, {ID: "n3"}, {ID: "n4"}, {ID: "n5"}, {ID: "n6"}}, Fenced: time.Now(), Stable: time.Hour, Alone: alone}
		m, err := newMember(GossipConfig{Name: "n2", Bind: "127.0.0.1:0", Join: []string{a.p.Gossip().Addr()}, Preset: "fast", Rejoin: r}, onServe...)
		if err != nil {
			t.Error(err)
		}
		done <- m
		out <- m
	}()
	return serve, out
}
