package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// FanoutName is the fan-out actor's name on every node.
const FanoutName = "fanout"

// fanoutActor hands a PresenceFanout's presence to each sink it names on
// this node, unless a view of a member declared dead sent it (Node.stale).
type fanoutActor struct{ n *Node }

func (f fanoutActor) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*messages.PresenceFanout); ok {
		if f.n.dropStale(ctx, m.GetPresence().GetUser()) {
			return
		}
		ev := &messages.PresenceEvent{Presence: m.GetPresence()} // read-only from here on
		for _, id := range m.GetSinkIds() {
			ctx.Send(actor.NewPID(ctx.Self().GetAddress(), id), ev)
		}
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

type directEvent struct {
	sink     *actor.PID
	presence *messages.Presence
}

type fanoutMsg struct {
	addr string
	msg  *messages.PresenceFanout
}

// route splits a view's deliveries: those for sinks on the view's own node,
// and those alone with their presence on a node, go straight to the sink;
// several sinks on another node that get the same trimmed presence share
// one PresenceFanout to that node. Deliveries for unknown sinks are dropped.
func route(ds []core.Delivery, sinks map[string]*actor.PID, self string) ([]directEvent, []fanoutMsg) {
	type group struct {
		addr     string
		presence *messages.Presence
		sinks    []*actor.PID
	}
	// Every field of a Presence, so equal keys are equal presences.
	type key struct {
		addr, user     string
		status         messages.Status
		show           messages.Show
		version        uint64
		lastSeenMinute uint32
	}
	var groups []*group
	byKey := map[key]*group{}
	for _, d := range ds {
		sink := sinks[d.Sink]
		if sink == nil {
			continue
		}
		p := d.Presence
		key := key{sink.GetAddress(), p.GetUser(), p.GetStatus(), p.GetShow(), p.GetVersion(), p.GetLastSeenMinute()}
		g := byKey[key]
		if g == nil {
			g = &group{addr: sink.GetAddress(), presence: d.Presence}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.sinks = append(g.sinks, sink)
	}
	var direct []directEvent
	var fanouts []fanoutMsg
	for _, g := range groups {
		if g.addr == self || len(g.sinks) == 1 {
			for _, s := range g.sinks {
				direct = append(direct, directEvent{s, g.presence})
			}
			continue
		}
		f := &messages.PresenceFanout{Presence: g.presence}
		for _, s := range g.sinks {
			f.SinkIds = append(f.SinkIds, s.GetId())
		}
		fanouts = append(fanouts, fanoutMsg{g.addr, f})
	}
	return direct, fanouts
}
