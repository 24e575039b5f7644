package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
)

// A member's events actor drops a stream's sink when proto.actor says it
// terminated, which it also says (AddressTerminated) when the connection
// between two live nodes breaks. The stream asks again every
// eventsResubscribe, so the member's events reach it again; the event the
// member saw while the sink was dropped does not. The drop is forged (a
// Terminated handed to the events actor): this runs the actor's side and
// the stream's asking again, not proto.actor's remote watch.
func TestEventsStreamTakenBackAfterADroppedSink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch, _ := e.n.Events(ctx)
		sink := streamSink(t, e.n)
		got := func(reason string) bool {
			e.n.emit(&messages.ObsEvent{Kind: "member", Reason: reason})
			synctest.Wait()
			for {
				select {
				case ev := <-ch:
					if ev.GetReason() == reason {
						return true
					}
				default:
					return false
				}
			}
		}
		if !got("before") {
			t.Fatal("a subscribed stream did not get the event")
		}
		e.n.root.Send(e.n.events.Load(), &actor.Terminated{Who: sink, Why: actor.TerminatedReason_AddressTerminated})
		synctest.Wait()
		if got("dropped") {
			t.Fatal("the stream got an event after its sink was dropped: the drop is not exercised")
		}
		time.Sleep(eventsResubscribe)
		synctest.Wait() // the ask of the same instant is in before the event
		if !got("after") {
			t.Fatalf("no event %v after the sink was dropped: the stream was not taken back", eventsResubscribe)
		}
		cancel()
		synctest.Wait()
		if got("cancelled") {
			t.Fatal("an event reached a stream whose context ended")
		}
	})
}

// streamSink is the sink of the node's one open event stream.
func streamSink(t *testing.T, n *Node) *actor.PID {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.eventSinks) != 1 {
		t.Fatalf("%d event streams, want 1", len(n.eventSinks))
	}
	for _, sub := range n.eventSinks {
		return pidOf(sub.GetSink())
	}
	return nil
}
