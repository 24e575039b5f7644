package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// unfence switches epoch fencing off in a node that has not served yet,
// for the negative control: its leases take a release from any
// connection of the device (core.Lease.Unfenced), and g's connections
// clean up after their socket whatever happened (unfencedConn).
func unfence(n *Node, g *Gateway) {
	n.leaseProps = actor.PropsFromProducer(func() actor.Actor {
		return &leaseActor{env: n.envs.lease, l: core.Lease{Unfenced: true}}
	}, perDeviceMailbox)
	g.connProps = actor.PropsFromProducer(func() actor.Actor {
		return &unfencedConn{connActor{g: g, env: n.envs.conn}}
	}, perDeviceMailbox)
}

// unfencedConn is a naive gateway's connection: told it lost its lease,
// it releases the lease as after a close before it closes.
type unfencedConn struct{ connActor }

func (a *unfencedConn) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*messages.ConnLost); ok && m.GetEpoch() == a.epoch && !a.ended {
		a.release(messages.EndReason_close, time.Now())
		a.ended = false // release marks it ended; onLost still closes it
	}
	a.connActor.Receive(ctx)
}

// Negative control: with fencing switched off, the superseded connection's
// cleanup removes the new owner's route while its socket lives.
func TestTakeoverWithoutFencingLosesNewRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed(), seams{unfenced: true}) // no renewal within the test
		old := e.connect(e.n.Gateway(), "alice", "phone", 1)
		cur := e.connect(e.n.Gateway(), "alice", "phone", 2)
		time.Sleep(time.Second)
		synctest.Wait()
		if code := old.sock.closeCode(); code != messages.CloseSuperseded {
			t.Fatalf("old connection closed with %d, want 4001", code)
		}
		st, err := e.n.Query(context.Background(), "alice")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.GetDevices()) != 0 {
			t.Fatalf("route = %v, want none: the unfenced cleanup removes the new route", st.GetDevices())
		}
		if code := cur.sock.closeCode(); code != 0 {
			t.Fatalf("the new socket closed with %d, want it alive", code)
		}
	})
}
