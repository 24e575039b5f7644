package actors

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// hubbedOut is a connection's outgoing side subscribed to user "u" (its
// snapshot out), known to the node's fan-out under id, with no actor
// behind it.
func hubbedOut(t *testing.T, n *Node, id string) (*connOut, *fakeSocket) {
	t.Helper()
	sock := &fakeSocket{}
	o := &connOut{sink: core.NewSink(), sock: sock}
	if _, err := o.sink.Subscribe("r", []string{"u"}, messages.Tier_realtime); err != nil {
		t.Fatal(err)
	}
	o.sendLocked(o.sink.SnapshotPart("r", "u", true, &messages.Presence{User: "u", Status: messages.Status_online, Version: 1}))
	n.hub.add(actor.NewPID(n.Address(), id), o)
	return o, sock
}

// The fan-out writes a view's event to a subscribed connection's socket
// itself: no message to the connection's actor (here there is none, so a
// PresenceEvent would be a dead letter and the socket would get nothing).
func TestFanoutWritesWithoutAMessagePerConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		_, sock := hubbedOut(t, e.n, "gateway/none")
		p := &messages.Presence{User: "u", Status: messages.Status_offline, Version: 2}
		e.n.fanout(p, []*actor.PID{actor.NewPID(e.n.Address(), "gateway/none")})
		synctest.Wait()
		if f := sock.sent(); len(f) != 2 || f[1].GetPresence() != p {
			t.Fatalf("frames %v, want the snapshot and the event", f)
		}
	})
}

// An event's subscribers, over every worker, get one frame made once for
// the event, not one each; a sink that has the version already takes
// nothing, and its socket gets nothing.
func TestFanoutSharesOneFramePerEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		var socks []*fakeSocket
		var pids []*actor.PID
		for i := range 5 {
			id := fmt.Sprintf("gateway/s%d", i)
			_, s := hubbedOut(t, e.n, id)
			socks, pids = append(socks, s), append(pids, actor.NewPID(e.n.Address(), id))
		}
		p := &messages.Presence{User: "u", Status: messages.Status_offline, Version: 2}
		e.n.fanout(p, pids)
		e.n.fanout(p, pids) // the same version again: no sink takes it
		synctest.Wait()
		first := socks[0].sent()
		for i, s := range socks {
			f := s.sent()
			if len(f) != 2 || f[1].GetPresence() != p {
				t.Fatalf("connection %d: frames %v, want the snapshot and the event once", i, f)
			}
			if f[1] != first[1] {
				t.Fatalf("connection %d got a frame of its own for the event, want the one shared", i)
			}
		}
	})
}

// Each connection's events leave in the order the views handed them over,
// however many workers write: a connection is always written by the same
// one. Here one connection's writes are slow, so the worker that writes it
// lags; were another connection's events written by whichever worker is
// free, a later one would overtake an earlier one (and the sink, having
// sent the newer, drops the older: a version missing).
func TestFanoutKeepsEachConnectionsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		const conns, events = 3, 50
		var socks []*fakeSocket
		var pids []*actor.PID
		for i := range conns {
			id := fmt.Sprintf("gateway/c%d", i)
			_, s := hubbedOut(t, e.n, id)
			socks, pids = append(socks, s), append(pids, actor.NewPID(e.n.Address(), id))
		}
		socks[0].slow = 1000
		for v := range events {
			e.n.fanout(&messages.Presence{User: "u", Status: messages.Status_online, Version: uint64(v + 2)}, pids)
		}
		synctest.Wait()
		for i, s := range socks {
			f := s.sent()
			if len(f) != events+1 {
				t.Fatalf("connection %d: %d frames, want the snapshot and %d events", i, len(f), events)
			}
			for k, fr := range f[1:] {
				if v := fr.GetPresence().GetVersion(); v != uint64(k+2) {
					t.Fatalf("connection %d: event %d has version %d, want %d", i, k, v, k+2)
				}
			}
		}
	})
}

// An event the fan-out finds no room for ends the connection with 4008,
// as its actor's own writes do, and nothing more is written to it.
func TestFanoutOverflowEndsTheConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		bob := e.connect(e.n.Gateway(), "bob", "laptop", 1)
		bob.conn.Subscribe("s1", []string{"u"}, messages.Tier_realtime)
		synctest.Wait()
		bob.sock.mu.Lock()
		bob.sock.limit = 2 // the snapshot and one event
		bob.sock.mu.Unlock()
		for v := range 3 {
			e.n.fanout(&messages.Presence{User: "u", Status: messages.Status_online, Version: uint64(v + 1)}, []*actor.PID{bob.conn.pid})
		}
		synctest.Wait()
		if c := bob.sock.closeCode(); c != messages.CloseOverflow {
			t.Fatalf("closed with %d, want %d", c, messages.CloseOverflow)
		}
		if n := e.n.Gateway().conns.Load(); n != 0 {
			t.Fatalf("%d connections after the overflow, want 0", n)
		}
	})
}
