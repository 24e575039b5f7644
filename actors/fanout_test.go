package actors

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// route groups sinks by node and trimmed presence, whatever their number:
// one group per node and trim, the view's own node included; unknown sinks
// are dropped.
func TestRouteGroupsBySubscriberNode(t *testing.T) {
	exact := &messages.Presence{User: "u", Status: messages.Status_online, Version: 9}
	coarse := &messages.Presence{User: "u", Status: messages.Status_online, Show: messages.Show_away, Version: 9}
	sinks := map[string]*actor.PID{
		"a1": actor.NewPID("nodeA:1", "gw/a1"), "a2": actor.NewPID("nodeA:1", "gw/a2"), "a3": actor.NewPID("nodeA:1", "gw/a3"),
		"a4": actor.NewPID("nodeA:1", "gw/a4"),
		"b1": actor.NewPID("nodeB:1", "gw/b1"),
		"l1": actor.NewPID("self:1", "gw/l1"), "l2": actor.NewPID("self:1", "gw/l2"),
	}
	ds := []core.Delivery{
		{Sink: "a1", Presence: exact}, {Sink: "a2", Presence: exact}, {Sink: "a3", Presence: exact},
		{Sink: "a4", Presence: coarse},
		{Sink: "b1", Presence: exact},
		{Sink: "l1", Presence: exact}, {Sink: "l2", Presence: exact},
		{Sink: "gone", Presence: exact},
	}
	var got []string
	for _, g := range route(ds, sinks) {
		var ids []string
		for _, s := range g.sinks {
			ids = append(ids, s.GetId())
		}
		trim := "exact"
		if g.presence == coarse {
			trim = "coarse"
		}
		got = append(got, fmt.Sprintf("%s %s %v", g.addr, trim, ids))
	}
	want := []string{"nodeA:1 exact [gw/a1 gw/a2 gw/a3]", "nodeA:1 coarse [gw/a4]", "nodeB:1 exact [gw/b1]", "self:1 exact [gw/l1 gw/l2]"}
	if !slices.Equal(got, want) {
		t.Fatalf("groups %q, want %q", got, want)
	}
	if ids := route(ds, sinks)[0].fanoutMsg().GetSinkIds(); !slices.Equal(ids, []string{"gw/a1", "gw/a2", "gw/a3"}) {
		t.Fatalf("PresenceFanout names %v", ids)
	}
}

// The fan-out actor hands the event to each sink it names on its node: a
// subscribed connection's socket gets the frame, and a sink that is not a
// connection (a probe) gets a PresenceEvent.
func TestFanoutActorDeliversToLocalSinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Fast())
		got := make(chan string, 4)
		probe := e.n.root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			if ev, ok := ctx.Message().(*messages.PresenceEvent); ok {
				got <- ev.GetPresence().GetUser()
			}
		}))
		bob := e.connect(e.n.Gateway(), "bob", "laptop", 1)
		bob.conn.Subscribe("s1", []string{"u"}, messages.Tier_realtime)
		synctest.Wait()
		e.n.root.Send(actor.NewPID(probe.GetAddress(), FanoutName), &messages.PresenceFanout{
			Presence: &messages.Presence{User: "u", Status: messages.Status_online, Version: 1},
			SinkIds:  []string{probe.GetId(), bob.conn.pid.GetId()},
		})
		synctest.Wait()
		if len(got) != 1 || <-got != "u" {
			t.Fatalf("the probe got no event")
		}
		if f := bob.sock.sent(); len(f) != 2 || f[1].GetPresence().GetUser() != "u" {
			t.Fatalf("bob's frames %v, want the snapshot and u's event", f)
		}
		bob.close()
	})
}

// route groups by every field of a Presence: one added to the message must
// be added to its key too.
func TestRouteKeyCoversPresence(t *testing.T) {
	if n := (&messages.Presence{}).ProtoReflect().Descriptor().Fields().Len(); n != 8 {
		t.Fatalf("Presence has %d fields; route's key has 8", n)
	}
}

// A view's event from a member this node declared dead is stale: a
// partitioned member's messages (or its exited process's, retransmitted by
// its kernel) arrive once the network heals, after the view was re-created
// elsewhere with nothing new to say, and would stand as the subscriber's
// state: the partition chaos scenario's false offline of a device that
// never moved. Both ways in drop it: straight to the connection, and
// through the fan-out; the same event from an alive member passes.
func TestViewEventsFromADeadMemberAreDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed(), seams{members: &fakeRoster{gone: map[string]bool{"dead:1": true}}})
		e.policy("alice", core.Exact, "bob")
		alice := e.connect(e.n.Gateway(), "alice", "phone", 1)
		bob := e.connect(e.n.Gateway(), "bob", "laptop", 1)
		bob.conn.Subscribe("s1", []string{"alice"}, messages.Tier_realtime)
		synctest.Wait()
		offline := func(v uint64) *messages.Presence {
			return &messages.Presence{User: "alice", Status: messages.Status_offline, Version: v}
		}
		frames := func() []*messages.Frame {
			bob.sock.mu.Lock()
			defer bob.sock.mu.Unlock()
			return slices.Clone(bob.sock.frames)
		}
		if f := frames(); len(f) != 1 || f[0].GetSnapshot() == nil {
			t.Fatalf("frames %v, want the snapshot", f)
		}
		dead, alive := actor.NewPID("dead:1", "view/alice"), actor.NewPID("alive:1", "view/alice")
		fanout := actor.NewPID(e.n.Address(), FanoutName)
		e.n.root.RequestWithCustomSender(bob.conn.pid, &messages.PresenceEvent{Presence: offline(1 << 62)}, dead)
		e.n.root.RequestWithCustomSender(fanout, &messages.PresenceFanout{Presence: offline(1<<62 + 1), SinkIds: []string{bob.conn.pid.GetId()}}, dead)
		synctest.Wait()
		if f := frames(); len(f) != 1 {
			t.Fatalf("frames %v: a dead member's view reached the subscriber", f)
		}
		e.n.root.RequestWithCustomSender(bob.conn.pid, &messages.PresenceEvent{Presence: offline(1 << 62)}, alive)
		synctest.Wait()
		e.n.root.RequestWithCustomSender(fanout, &messages.PresenceFanout{Presence: offline(1<<62 + 1), SinkIds: []string{bob.conn.pid.GetId()}}, alive)
		synctest.Wait()
		if f := frames(); len(f) != 3 || f[1].GetPresence().GetVersion() != 1<<62 || f[2].GetPresence().GetVersion() != 1<<62+1 {
			t.Fatalf("frames %v, want the alive member's two events", f)
		}
		alice.close()
	})
}

// A lease's ConnLost from a member declared dead is dropped too: what a
// partitioned member's lease refused reaches this node only once the
// network lets it through, when that member's leases live elsewhere; the
// connection stays open. The same from a member alive closes it.
func TestConnLostFromADeadMemberIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed(), seams{members: &fakeRoster{gone: map[string]bool{"dead:1": true}}})
		bob := e.connect(e.n.Gateway(), "bob", "laptop", 1)
		synctest.Wait()
		dead, alive := actor.NewPID("dead:1", "lease/bob/laptop"), actor.NewPID("alive:1", "lease/bob/laptop")
		lost := &messages.ConnLost{ConnId: bob.conn.ID, Epoch: 1, Reason: messages.EndReason_superseded}
		e.n.root.RequestWithCustomSender(e.n.Gateway().pid, lost, dead)
		synctest.Wait()
		if code := bob.sock.closeCode(); code != 0 {
			t.Fatalf("after a dead member's ConnLost: close code %v, want open", code)
		}
		e.n.root.RequestWithCustomSender(e.n.Gateway().pid, lost, alive)
		synctest.Wait()
		if code := bob.sock.closeCode(); code != messages.CloseSuperseded {
			t.Fatalf("after an alive member's ConnLost: close code %v, want %v", code, messages.CloseSuperseded)
		}
	})
}
