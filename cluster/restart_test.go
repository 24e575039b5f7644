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

// A fenced node's new incarnation takes no identities while it waits to
// serve; it does once it serves, an update the gossip marks Served (the
// members treat it as a join: connections re-register).
func TestFencedIncarnationIsPlacedOnceItServes(t *testing.T) {
	none := func(string) bool { return false }
	alive := Member{ID: "n2", State: Alive}
	for _, tc := range []struct {
		name    string
		m       Member
		meta    Meta
		blocked func(string) bool
		want    bool
	}{
		{"serving", alive, Meta{ID: "b1"}, none, true},
		{"fenced, waiting to serve", alive, Meta{ID: "b2", Fenced: true}, none, false},
		{"itself, fenced in its own table as it starts to serve", Member{ID: "n1", State: Alive}, Meta{ID: "a1", Fenced: true}, none, true},
		{"dead", Member{ID: "n2", State: Dead}, Meta{ID: "b1"}, none, false},
		{"blocked (refuted its death)", alive, Meta{ID: "b1"}, func(id string) bool { return id == "b1" }, false},
		{"no actor system id yet", alive, Meta{}, none, false},
	} {
		if got := placeable(tc.m, tc.meta, "n1", tc.blocked); got != tc.want {
			t.Errorf("%s: placeable = %v, want %v", tc.name, got, tc.want)
		}
	}

	g := members(time.Now(), map[string]State{"n2": Alive}, nil)
	g.metas["n2"] = Meta{ID: "b2", Fenced: true}
	up := func(meta Meta) Event {
		return g.apply(Event{Kind: EventUpdated, Member: Member{ID: "n2", State: Alive}, Meta: meta, At: time.Now()})
	}
	if ev := up(Meta{ID: "b2", Fenced: true}); ev.Served {
		t.Fatal("an update of a member still fenced is marked served")
	}
	if ev := up(Meta{ID: "b2"}); !ev.Served || ev.Restarted {
		t.Fatalf("the update clearing Fenced: served %v restarted %v, want served only", ev.Served, ev.Restarted)
	}
	if ev := up(Meta{ID: "b2", Admin: "x"}); ev.Served {
		t.Fatal("a later update of a serving member is marked served")
	}
}
