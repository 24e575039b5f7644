package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
)

// A member that fences and comes back as a new incarnation under the same
// name before anyone declared it dead (its leave lost or late) is reported
// by the gossip only as an update with a new actor system id: its old
// incarnation's devices must go as after a failure (issue 13's ghosts:
// views listed them online for ever, their leases gone with the process).
func TestRestartedMemberLeavesNoGhost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e, g2, p, d := aliceOnSecondGateway(t, timing)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		// The old incarnation's process ends with the device's lease in it.
		d.halt()
		g2.Crash()
		for _, pid := range e.n.index[string(KindLease)].pids() {
			_ = e.n.root.StopFuture(pid).Wait()
		}
		// The same name is back, never reported failed or left.
		e.n.onMember(cluster.Event{Kind: cluster.EventUpdated, Member: cluster.Member{ID: "g2", State: cluster.Alive}, Meta: cluster.Meta{ID: "new", Up: time.Now().UnixMilli()}, Restarted: true})
		time.Sleep(timing.TTL + timing.Debounce + time.Second)
		synctest.Wait()
		st, err := e.n.Query(context.Background(), "alice")
		if err != nil {
			t.Fatal(err)
		}
		if st.Online || len(st.Devices) != 0 {
			t.Fatalf("ghost: view online=%v devices=%v after its member restarted and its lease went with it", st.Online, st.Devices)
		}
		e.expectOfflineSecond(p, time.Minute)
	})
}

// A plain metadata update of the same incarnation (not
// cluster.Event.Restarted) is no departure: its devices stay.
func TestMemberUpdateKeepsDevices(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _, _, d := aliceOnSecondGateway(t, config.Fast())
		e.n.onMember(cluster.Event{Kind: cluster.EventUpdated, Member: cluster.Member{ID: "g2", State: cluster.Alive}, Meta: cluster.Meta{ID: "same", Up: time.Now().UnixMilli()}})
		time.Sleep(time.Second)
		synctest.Wait()
		st, _ := e.n.Query(context.Background(), "alice")
		if !st.Online || len(st.Devices) != 1 {
			t.Fatalf("view online=%v devices=%v after a mere update, want the phone", st.Online, st.Devices)
		}
		d.close()
	})
}

// A device that connected to the new incarnation before this node heard
// of the restart stays: only the old incarnation's connections (opened
// before the new one started, cluster.Meta.Up) go, on the view and lease.
func TestRestartedMemberKeepsItsNewConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e, g2, p, d := aliceOnSecondGateway(t, timing)
		time.Sleep(10 * time.Second)
		d.halt()
		g2.Crash()
		up := time.Now()
		time.Sleep(100 * time.Millisecond)
		g2new, err := e.n.StartGateway("g2")
		if err != nil {
			t.Fatal(err)
		}
		tablet := e.connect(g2new, "alice", "tablet", 1)
		e.n.onMember(cluster.Event{Kind: cluster.EventUpdated, Member: cluster.Member{ID: "g2", State: cluster.Alive}, Meta: cluster.Meta{ID: "new", Up: up.UnixMilli()}, Restarted: true})
		time.Sleep(timing.TTL + time.Second)
		synctest.Wait()
		st, _ := e.n.Query(context.Background(), "alice")
		if !st.Online || len(st.Devices) != 1 || st.Devices[0].Device != "tablet" {
			t.Fatalf("view online=%v devices=%v, want the tablet of the new incarnation only", st.Online, st.Devices)
		}
		if c := tablet.sock.closeCode(); c != 0 {
			t.Fatalf("the new incarnation's connection was closed (%v): its lease was reclaimed", c)
		}
		e.expectStatuses(p, time.Second, "0s online")
		tablet.close()
	})
}

// A restart is a leave and a join: what lived in the old process (here,
// the user's view) is gone, so this node's connections re-register and
// their devices are announced to the views again.
func TestRestartedMemberMakesConnectionsReregister(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, laptop := bobWithoutHisView(t)
		e.n.onMember(cluster.Event{Kind: cluster.EventUpdated, Member: cluster.Member{ID: "g2", State: cluster.Alive}, Meta: cluster.Meta{ID: "new", Up: time.Now().UnixMilli()}, Restarted: true})
		e.expectBobOnline(true, "after a member restarted")
		laptop.close()
	})
}

// A fenced member's incarnation that starts to serve (an update the gossip
// marks Served) enters the placement, so connections re-register as after
// a join: a view re-created there gets its devices back. A plain update
// moves nothing.
func TestServingMemberMakesConnectionsReregister(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, laptop := bobWithoutHisView(t)
		e.n.onMember(cluster.Event{Kind: cluster.EventUpdated, Member: cluster.Member{ID: "g2", State: cluster.Alive}, Meta: cluster.Meta{ID: "g2-1"}})
		e.expectBobOnline(false, "after a plain update")
		e.n.onMember(cluster.Event{Kind: cluster.EventUpdated, Member: cluster.Member{ID: "g2", State: cluster.Alive}, Meta: cluster.Meta{ID: "g2-1"}, Served: true})
		e.expectBobOnline(true, "after a member started to serve")
		laptop.close()
	})
}

// A fenced incarnation's join (it waits to serve, and takes no identities
// meanwhile) is no membership change here; an ordinary join is.
func TestFencedJoinMovesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Fast())
		e.n.onMember(cluster.Event{Kind: cluster.EventJoined, Member: cluster.Member{ID: "g2", State: cluster.Alive}, Meta: cluster.Meta{ID: "g2-1", Fenced: true}})
		if e.n.changedAt.Load() != 0 {
			t.Fatal("a fenced incarnation's join counted as a membership change")
		}
		e.n.onMember(cluster.Event{Kind: cluster.EventJoined, Member: cluster.Member{ID: "g3", State: cluster.Alive}, Meta: cluster.Meta{ID: "g3-1"}})
		if e.n.changedAt.Load() == 0 {
			t.Fatal("a join did not count as a membership change")
		}
	})
}

// bobWithoutHisView is a node (fast preset) where bob's laptop is online
// and his view is gone, as when it lived on a member that went away.
func bobWithoutHisView(t *testing.T) (*env, *device) {
	e := newEnv(t, config.Fast())
	laptop := e.connect(e.n.Gateway(), "bob", "laptop", 1)
	time.Sleep(time.Second)
	synctest.Wait()
	for _, pid := range e.n.index[string(KindView)].pids() {
		e.n.dir.Forget(KindView, "bob", pid)
		_ = e.n.root.StopFuture(pid).Wait()
	}
	return e, laptop
}

// expectBobOnline lets a renewal interval pass and checks whether bob's
// view has his laptop (re-registered) or not.
func (e *env) expectBobOnline(want bool, when string) {
	e.t.Helper()
	time.Sleep(e.n.deps.Timing.Renew)
	synctest.Wait()
	st, err := e.n.Query(context.Background(), "bob")
	if err != nil {
		e.t.Fatal(err)
	}
	if got := st.Online && len(st.Devices) == 1; got != want {
		e.t.Fatalf("view online=%v devices=%v %s, want the laptop re-registered: %v", st.Online, st.Devices, when, want)
	}
}

// A device up from a lease of the old incarnation's connection that
// arrives after its departure reached the view (it was on its way when the
// node fenced) is ignored once the member of that name is a newer
// incarnation: else it stands for ever, its lease gone with the process.
func TestLateDeviceUpFromEarlierIncarnationIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		opened := time.Now()
		members := &fakeRoster{up: map[string]int64{}}
		e, g2, p, d := aliceOnSecondGateway(t, timing, seams{members: members})
		old := &messages.Holder{Node: "g2", ConnId: "g2-alice-phone-1", Epoch: 1, SinceMs: opened.UnixMilli()}
		time.Sleep(10 * time.Second)
		d.halt()
		g2.Crash()
		up := time.Now()
		members.setUp("g2", up.UnixMilli())
		e.n.onMember(cluster.Event{Kind: cluster.EventUpdated, Member: cluster.Member{ID: "g2", State: cluster.Alive}, Meta: cluster.Meta{ID: "new", Up: up.UnixMilli()}, Restarted: true})
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		e.n.dir.Send(KindView, "alice", &messages.DeviceUp{User: "alice", Device: "phone", Holder: old, SinceMs: old.GetSinceMs()})
		time.Sleep(timing.TTL + time.Second)
		synctest.Wait()
		st, _ := e.n.Query(context.Background(), "alice")
		if st.Online || len(st.Devices) != 0 {
			t.Fatalf("ghost: view online=%v devices=%v after a late device up of the old incarnation", st.Online, st.Devices)
		}
		e.expectOfflineSecond(p, time.Minute)
	})
}

// A connection opened before its node's last membership change can have
// reached every member (within the propagation) re-registers once it has,
// when its lease or view may have moved, as the connections open at the
// change do: a view the others placed elsewhere meanwhile gets its device
// back. One opened after that, or on a node where nothing moved (alone),
// does not.
func TestConnectionOpenedEarlyAfterAChangeReregisters(t *testing.T) {
	for _, c := range []struct {
		name  string
		after time.Duration // from the change to the connect
		moved bool
		want  bool
	}{
		{"within the propagation", 100 * time.Millisecond, true, true},
		{"within it, nothing moved", 100 * time.Millisecond, false, false},
		{"after it", 3 * time.Second, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				timing := config.Fast()
				timing.Settle = 5 * time.Second // a cluster's (cluster.Timings)
				e := newEnvWith(t, Deps{Timing: timing}, seams{members: &fakeRoster{moved: c.moved}})
				e.n.envs.conn.propagation = 2 * time.Second
				e.n.changed()
				time.Sleep(c.after)
				laptop := e.connect(e.n.Gateway(), "bob", "laptop", 1)
				synctest.Wait()
				for _, pid := range e.n.index[string(KindView)].pids() { // the view the others will route to has no laptop
					e.n.dir.Forget(KindView, "bob", pid)
					_ = e.n.root.StopFuture(pid).Wait()
				}
				time.Sleep(2 * time.Second) // the propagation, at most
				e.expectBobOnline(c.want, "after the propagation")
				laptop.close()
			})
		})
	}
}
