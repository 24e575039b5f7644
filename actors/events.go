package actors

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/messages"
)

// EventsName is the events actor's name on every node: it sends what its
// node sees (ObsEvent) to every subscribed sink, on any node.
const EventsName = "events"

type eventsActor struct {
	sinks map[string]*actor.PID
}

func (a *eventsActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.sinks = map[string]*actor.PID{}
	case *messages.EventsSubscribe:
		if sink := pidOf(m.GetSink()); sink != nil {
			if _, ok := a.sinks[sinkKey(sink)]; !ok {
				a.sinks[sinkKey(sink)] = sink
				ctx.Watch(sink)
			}
		}
		if ctx.Sender() != nil {
			ctx.Respond(&messages.EventsSubscribed{})
		}
	case *messages.EventsUnsubscribe:
		if sink := pidOf(m.GetSink()); sink != nil {
			delete(a.sinks, sinkKey(sink))
			ctx.Unwatch(sink)
		}
	case *actor.Terminated:
		delete(a.sinks, sinkKey(m.GetWho()))
	case *messages.ObsEvent:
		for _, sink := range a.sinks {
			ctx.Send(sink, m)
		}
	}
}

// emit hands an event to this node's events actor.
func (n *Node) emit(ev *messages.ObsEvent) {
	if pid := n.events.Load(); pid != nil {
		ev.Node, ev.AtMs = n.deps.NodeID, time.Now().UnixMilli()
		n.root.Send(pid, ev)
	}
}

// eventSink is the local end of a subscription: it passes events to a
// channel, dropping them when the reader lags (counted).
type eventSink struct {
	out     chan *messages.ObsEvent
	dropped *atomic.Int64
}

func (s eventSink) Receive(ctx actor.Context) {
	if ev, ok := ctx.Message().(*messages.ObsEvent); ok {
		select {
		case s.out <- ev:
		default:
			s.dropped.Add(1)
		}
	}
}

// subscribeWait bounds how long Events waits for every alive member to
// take its sink in.
const subscribeWait = 2 * time.Second

// eventsResubscribe is how often a stream asks every alive member again to
// send to its sink. A member's events actor drops a sink when proto.actor
// says it terminated, and proto.actor says so (AddressTerminated) when the
// connection between the two nodes breaks, not only when the sink's node
// dies; nothing else would take the sink back while both nodes live, and
// the stream would miss that member's events for good. Asking again is
// idempotent (a sink is kept once), so a dropped sink is back within this
// and a subscription lost on the way is retried; what the member saw in
// between is not replayed.
const eventsResubscribe = 10 * time.Second

// Events streams what every member sees until ctx ends: each member's
// events actor, and each member that joins later, sends to one sink here.
// It returns once every alive member's events actor took the sink in
// (within subscribeWait: one that does not answer is still asked), so
// that whatever a member sees from then on reaches the stream; every
// eventsResubscribe it asks them all again. dropped counts events lost
// because the reader lagged.
func (n *Node) Events(ctx context.Context) (events <-chan *messages.ObsEvent, dropped *atomic.Int64) {
	out := make(chan *messages.ObsEvent, 256)
	dropped = &atomic.Int64{}
	sink := n.root.Spawn(actor.PropsFromProducer(func() actor.Actor { return eventSink{out, dropped} }))
	sub := &messages.EventsSubscribe{Sink: refOf(sink)}
	n.mu.Lock()
	n.eventSinks[sinkKey(sink)] = sub
	n.mu.Unlock()
	var acks []*actor.Future
	for _, pid := range n.eventsActors() {
		acks = append(acks, n.root.RequestFuture(pid, sub, subscribeWait))
	}
	for _, f := range acks {
		_, _ = f.Result() // a member that did not answer: its events come when they come
	}
	go n.keepSubscribed(ctx, sink, sub)
	return out, dropped
}

// keepSubscribed asks every alive member to send to sink again every
// eventsResubscribe until ctx ends, then unsubscribes it everywhere and
// stops it.
func (n *Node) keepSubscribed(ctx context.Context, sink *actor.PID, sub *messages.EventsSubscribe) {
	t := time.NewTicker(eventsResubscribe)
	defer t.Stop()
	for done := false; !done; {
		select {
		case <-t.C:
			for _, pid := range n.eventsActors() {
				n.root.Send(pid, sub)
			}
		case <-ctx.Done():
			done = true
		}
	}
	n.mu.Lock()
	delete(n.eventSinks, sinkKey(sink))
	n.mu.Unlock()
	for _, pid := range n.eventsActors() {
		n.root.Send(pid, &messages.EventsUnsubscribe{Sink: refOf(sink)})
	}
	_ = n.root.StopFuture(sink).Wait()
}

// eventsActors is every alive member's events actor (this node's alone).
func (n *Node) eventsActors() []*actor.PID {
	var out []*actor.PID
	if pid := n.events.Load(); pid != nil {
		out = append(out, pid)
	}
	g := n.members
	if g == nil {
		return out
	}
	for _, m := range g.Members() {
		if m.ID == n.deps.NodeID || m.State != cluster.Alive {
			continue
		}
		if meta, ok := g.Meta(m.ID); ok && meta.Actor != "" {
			out = append(out, actor.NewPID(meta.Actor, EventsName))
		}
	}
	return out
}

// subscribeEvents subscribes this node's event sinks to a member that just
// joined.
func (n *Node) subscribeEvents(meta cluster.Meta) {
	if meta.Actor == "" {
		return
	}
	n.mu.Lock()
	subs := make([]*messages.EventsSubscribe, 0, len(n.eventSinks))
	for _, s := range n.eventSinks {
		subs = append(subs, s)
	}
	n.mu.Unlock()
	pid := actor.NewPID(meta.Actor, EventsName)
	for _, s := range subs {
		n.root.Send(pid, s)
	}
}
