package cluster

import (
	"testing"
	"time"
)

// A member that stops without its leave reaching anyone (a fenced node
// whose leave was lost or late) and comes back at once under the same
// name and address, as a new incarnation (another actor system id), is
// reported to the others as an update, never as failed or left: whoever
// follows membership must tell departures by the changed Meta.ID (the
// actors' Node does: issue 13's ghosts).
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
	if _, ok := ra.find(EventUpdated, "n2"); !ok {
		t.Fatalf("n2's new incarnation not reported as an update: %+v", ra.events)
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
