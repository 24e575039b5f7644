package actors

import (
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// FanoutName is the fan-out actor's name on every node.
const FanoutName = "fanout"

// fanoutActor hands a PresenceFanout's presence to the sinks it names on
// this node (Node.fanout), unless a view of a member declared dead sent it
// (Node.stale).
type fanoutActor struct{ n *Node }

func (f fanoutActor) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*messages.PresenceFanout); ok {
		if f.n.dropStale(ctx, m.GetPresence().GetUser()) {
			return
		}
		pids := make([]*actor.PID, len(m.GetSinkIds()))
		for i, id := range m.GetSinkIds() {
			pids[i] = actor.NewPID(ctx.Self().GetAddress(), id)
		}
		f.n.fanout(m.GetPresence(), pids) // read-only from here on
	}
}

// sendFrom sends msg to another node's actor with the sender's PID, so the
// receiver can tell a message of a member it declared dead (Node.stale);
// a local one goes without it.
func sendFrom(ctx actor.Context, to *actor.PID, msg any) {
	if to.GetAddress() == ctx.Self().GetAddress() {
		ctx.Send(to, msg)
		return
	}
	ctx.Request(to, msg)
}

// dropStale reports (and logs at debug) a message to drop: a view's event
// or a lease's ConnLost from a member this node declared dead or left;
// about names its user or connection.
func (n *Node) dropStale(ctx actor.Context, about string) bool {
	if !n.stale(ctx.Sender()) {
		return false
	}
	n.log.Debug("message from a member declared dead: dropped", "about", about, "from", ctx.Sender().GetAddress(), "type", fmt.Sprintf("%T", ctx.Message()))
	return true
}

// fanGroup is the sinks on one node that get the same trimmed presence.
type fanGroup struct {
	addr     string
	presence *messages.Presence
	sinks    []*actor.PID
}

// route groups a view's deliveries by the sinks' node and trimmed presence:
// each group is one call to the view's own node's fan-out, or one
// PresenceFanout to another node's, whatever the number of sinks there.
// A view's publish shares one presence among the subscribers it trims
// alike (core.View), so the presence's pointer is the group's key: a
// handful of groups per event, searched in order. Deliveries for unknown
// sinks are dropped.
func route(ds []core.Delivery, sinks map[string]*actor.PID) []*fanGroup {
	var groups []*fanGroup
	for _, d := range ds {
		sink := sinks[d.Sink]
		if sink == nil {
			continue
		}
		addr := sink.GetAddress()
		i := slices.IndexFunc(groups, func(g *fanGroup) bool { return g.presence == d.Presence && g.addr == addr })
		if i < 0 {
			i = len(groups)
			groups = append(groups, &fanGroup{addr: addr, presence: d.Presence})
		}
		groups[i].sinks = append(groups[i].sinks, sink)
	}
	return groups
}

// fanoutMsg is a group's PresenceFanout to another node.
func (g *fanGroup) fanoutMsg() *messages.PresenceFanout {
	f := &messages.PresenceFanout{Presence: g.presence, SinkIds: make([]string, len(g.sinks))}
	for i, s := range g.sinks {
		f.SinkIds[i] = s.GetId()
	}
	return f
}
