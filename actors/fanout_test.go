package actors

import (
	"slices"
	"testing"
	"testing/synctest"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// Several sinks on one remote node that get the same trimmed presence share
// one message to that node; a sink alone with its presence there, a sink on
// the view's own node, and another trim each go their own way; unknown
// sinks are dropped.
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
	direct, fanouts := route(ds, sinks, "self:1")
	if len(fanouts) != 1 || fanouts[0].addr != "nodeA:1" || !slices.Equal(fanouts[0].msg.GetSinkIds(), []string{"gw/a1", "gw/a2", "gw/a3"}) ||
		fanouts[0].msg.GetPresence() != exact {
		t.Fatalf("fanouts %+v, want one to nodeA for a1..a3", fanouts)
	}
	var got []string
	for _, d := range direct {
		got = append(got, d.sink.GetId())
		if d.sink.GetId() == "gw/a4" && d.presence != coarse {
			t.Fatalf("a4 got %v, want the coarse trim", d.presence)
		}
	}
	slices.Sort(got)
	if want := []string{"gw/a4", "gw/b1", "gw/l1", "gw/l2"}; !slices.Equal(got, want) {
		t.Fatalf("direct to %v, want %v", got, want)
	}
}

// The fan-out actor hands the event to each sink it names on its node.
func TestFanoutActorDeliversToLocalSinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Fast())
		got := make(chan string, 4)
		var pids []*actor.PID
		for range 2 {
			pids = append(pids, e.n.root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
				if ev, ok := ctx.Message().(*messages.PresenceEvent); ok {
					got <- ctx.Self().GetId() + " " + ev.GetPresence().GetUser()
				}
			})))
		}
		e.n.root.Send(actor.NewPID(pids[0].GetAddress(), FanoutName), &messages.PresenceFanout{
			Presence: &messages.Presence{User: "u", Status: messages.Status_online, Version: 1},
			SinkIds:  []string{pids[0].GetId(), pids[1].GetId()},
		})
		synctest.Wait()
		var recv []string
		for len(got) > 0 {
			recv = append(recv, <-got)
		}
		slices.Sort(recv)
		want := []string{pids[0].GetId() + " u", pids[1].GetId() + " u"}
		slices.Sort(want)
		if !slices.Equal(recv, want) {
			t.Fatalf("sinks got %v, want %v", recv, want)
		}
	})
}

// route groups by every field of a Presence: one added to the message must
// be added to its key too.
func TestRouteKeyCoversPresence(t *testing.T) {
	if n := (&messages.Presence{}).ProtoReflect().Descriptor().Fields().Len(); n != 5 {
		t.Fatalf("Presence has %d fields; route's key has 5", n)
	}
}
