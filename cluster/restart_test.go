package cluster

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
)

// A member that stops without its leave reaching anyone (a fenced node
// whose leave was lost or late) and comes back at once under the same
// name and address, as a new incarnation (another actor system id), is
// reported to the others as an update, never as failed or left: whoever
// follows membership must tell the departure by the changed Meta.ID (the
// gossip marks it Event.Restarted: issue 13's ghosts).
func TestRestartUnderSameNameIsAnUpdate(t *testing.T) {
	a, ra := startGossipMeta(t, "n1", "127.0.0.1:0", Meta{ID: "a1"})
	b, _ := startGossipMeta(t, "n2", "127.0.0.1:0", Meta{ID: "b1"}, a.Addr())
	waitUntil(t, 5*time.Second, "2 members", func() bool { return len(a.Members()) == 2 && len(b.Members()) == 2 })
	addr := b.Addr()
	b.Shutdown() // its leave lost: nobody is told
	b2, _ := startGossipMeta(t, "n2", addr, Meta{ID: "b2"}, a.Addr())
	defer b2.Shutdown()
	defer a.Shutdown()
	waitUntil(t, FailureDetection("fast", 2), "n1 sees n2's new incarnation", func() bool {
		m, ok := a.Meta("n2")
		return ok && m.ID == "b2"
	})
	if ev, ok := ra.find(EventFailed, "n2"); ok {
		t.Skipf("n2 was declared failed first (%v): the machine was too slow for the race", ev.At)
	}
	if _, ok := ra.find(EventLeft, "n2"); ok {
		t.Fatal("n2 reported left; it never left")
	}
	ev, ok := ra.find(EventUpdated, "n2")
	if !ok || !ev.Restarted {
		t.Fatalf("n2's new incarnation not reported as a restart (update %v, restarted %v): %+v", ok, ev.Restarted, ra.events)
	}
}

func startGossipMeta(t *testing.T, name, bind string, meta Meta, join ...string) (*Gossip, *recorder) {
	t.Helper()
	r := &recorder{}
	meta.Actor = "127.0.0.1:9" + name[len(name)-1:]
	g, err := NewGossip(GossipConfig{Name: name, Bind: bind, Join: join, Preset: "fast", Key: []byte("0123456789abcdef"), Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	g.Subscribe(r.add)
	return g, r
}

// A restart seen only as an update drops proto.actor's endpoint to the
// member's actor address, as a join or failure does: the writer to the
// old incarnation would go on retrying with its mailbox growing. A plain
// update leaves it.
func TestResetEndpointOnRestart(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	c := &pcluster.Cluster{ActorSystem: sys}
	var got []string
	sub := sys.EventStream.Subscribe(func(ev any) {
		if e, ok := ev.(*remote.EndpointTerminatedEvent); ok {
			got = append(got, e.Address)
		}
	})
	defer sys.EventStream.Unsubscribe(sub)
	resetEndpoint(c, Event{Kind: EventUpdated, Meta: Meta{ID: "b1", Actor: "127.0.0.1:1"}})
	resetEndpoint(c, Event{Kind: EventUpdated, Meta: Meta{ID: "b2", Actor: "127.0.0.1:2"}, Restarted: true})
	if len(got) != 1 || got[0] != "127.0.0.1:2" {
		t.Fatalf("endpoints reset %v, want only the restarted member's 127.0.0.1:2", got)
	}
}
