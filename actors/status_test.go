package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// statusAlice is alice's phone on the node's own gateway and her laptop on
// a second one, g2, both connected and known to her view; bob may see her.
func statusAlice(t *testing.T) (e *env, g2 *Gateway, phone, laptop *device) {
	t.Helper()
	e = newEnv(t, config.Fast())
	e.policy("alice", core.Exact, "bob")
	g2, err := e.n.StartGateway("g2")
	if err != nil {
		t.Fatal(err)
	}
	phone = e.connect(e.n.Gateway(), "alice", "phone", 1)
	laptop = e.connect(g2, "alice", "laptop", 1)
	synctest.Wait()
	return e, g2, phone, laptop
}

// loseMember is the death of the member holding gateway g and the user's
// view: g's sockets go silent, the view is gone, and the member is
// declared failed, so this node's connections re-register (and replay the
// user's status) to a re-created view.
func (e *env) loseMember(g *Gateway, user string, silent ...*device) {
	e.t.Helper()
	for _, d := range silent {
		d.halt()
	}
	g.Crash()
	for _, pid := range e.n.index[string(KindView)].pids() {
		e.n.dir.Forget(KindView, user, pid)
		_ = e.n.root.StopFuture(pid).Wait()
	}
	e.n.onMember(cluster.Event{Kind: cluster.EventFailed, Member: cluster.Member{ID: g.Node(), State: cluster.Dead}})
	time.Sleep(e.n.deps.Timing.Renew + e.n.deps.Timing.Settle)
	synctest.Wait()
}

// seenByBob is alice's presence as a new subscriber bob sees it, and her
// raw state.
func (e *env) seenByBob() (*messages.Presence, *messages.ViewState) {
	e.t.Helper()
	st, err := e.n.Query(context.Background(), "alice")
	if err != nil {
		e.t.Fatal(err)
	}
	p := e.subscribe("alice", "bob")
	synctest.Wait()
	parts := p.snapshot()
	if len(parts) != 1 || !parts[0].GetVisible() {
		e.t.Fatalf("bob's snapshot %v, want alice visible", parts)
	}
	return parts[0].GetPresence(), st
}

// The laptop sets "dnd, in a meeting" and dies with the member that holds
// its gateway and alice's view: the phone, which set nothing, heard the
// status from the view and tells it again, so the re-created view has it.
func TestStatusOutlivesTheDeviceThatSetIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, g2, phone, laptop := statusAlice(t)
		laptop.conn.SetStatus(messages.Show_dnd, "in a meeting", 0)
		synctest.Wait()
		e.loseMember(g2, "alice", laptop)
		p, st := e.seenByBob()
		if len(st.GetDevices()) != 1 || st.GetDevices()[0].GetDevice() != "phone" {
			t.Fatalf("devices %v, want the phone alone", st.GetDevices())
		}
		if st.GetUserShow() != messages.Show_dnd || p.GetShow() != messages.Show_dnd || p.GetStatusText() != "in a meeting" {
			t.Fatalf("after the failover bob sees %v (user show %v): the laptop's status is lost", p, st.GetUserShow())
		}
		phone.close()
	})
}

// The phone set "dnd, on the train", then the laptop cleared it (auto):
// the clear is what the phone heard last and tells again, so the old
// status does not come back with the failover.
func TestClearedStatusStaysClearedAfterFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, g2, phone, laptop := statusAlice(t)
		phone.conn.SetStatus(messages.Show_dnd, "on the train", 0)
		synctest.Wait()
		time.Sleep(time.Second)
		laptop.conn.SetStatus(messages.Show_auto, "", 0)
		synctest.Wait()
		e.loseMember(g2, "alice", laptop)
		p, st := e.seenByBob()
		if st.GetUserShow() != messages.Show_show_unspecified || p.GetShow() != messages.Show_available || p.GetStatusText() != "" {
			t.Fatalf("after the failover bob sees %v (user show %v): a cleared status came back", p, st.GetUserShow())
		}
		phone.close()
	})
}

// The laptop's status replaced the phone's and expired before the
// failover: it is told again as it was set and shows nothing, and neither
// it nor the phone's older one comes back.
func TestExpiredStatusNotResurrected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, g2, phone, laptop := statusAlice(t)
		phone.conn.SetStatus(messages.Show_away, "on the train", 0)
		synctest.Wait()
		time.Sleep(time.Second)
		laptop.conn.SetStatus(messages.Show_dnd, "in a meeting", time.Now().Add(time.Second).UnixMilli())
		synctest.Wait()
		time.Sleep(2 * time.Second)
		e.loseMember(g2, "alice", laptop)
		p, st := e.seenByBob()
		if st.GetUserShow() != messages.Show_show_unspecified || p.GetShow() != messages.Show_available || p.GetStatusText() != "" {
			t.Fatalf("after the failover bob sees %v (user show %v): an expired status came back", p, st.GetUserShow())
		}
		phone.close()
	})
}
