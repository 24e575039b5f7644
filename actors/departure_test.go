package actors

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
)

// downSpy counts the DeviceDowns sent to views through the directory.
type downSpy struct {
	Directory
	mu    sync.Mutex
	downs map[string]int // by user/device
}

func (d *downSpy) Send(kind Kind, id string, msg any) {
	if m, ok := msg.(*messages.DeviceDown); ok && kind == KindView {
		d.mu.Lock()
		d.downs[leaseID(m.GetUser(), m.GetDevice())]++
		d.mu.Unlock()
	}
	d.Directory.Send(kind, id, msg)
}

func (d *downSpy) count(user, device string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.downs[leaseID(user, device)]
}

// spied is a seam counting the DeviceDowns to views.
func spied(members cluster.Roster) (seams, *downSpy) {
	spy := &downSpy{downs: map[string]int{}}
	return seams{members: members, wrapDir: func(d Directory) Directory { spy.Directory = d; return spy }}, spy
}

// A member's failure reaches each view once: from the view's own node
// (GatewayDown), which drops the device held there; the device's lease,
// ended by the same failure, does not tell the view again. (Before, the
// lease's DeviceDown followed, and the view dropped it as stale.)
func TestDepartureReachesTheViewOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		s, spy := spied(nil)
		e, g2, p, d := aliceOnSecondGateway(t, timing, s)
		time.Sleep(10 * time.Second)
		d.halt()
		g2.Crash()
		e.n.onMember(cluster.Event{Kind: cluster.EventFailed, Member: cluster.Member{ID: "g2", State: cluster.Dead}})
		time.Sleep(time.Second)
		synctest.Wait()
		if n := spy.count("alice", "phone"); n != 0 {
			t.Fatalf("the view heard of the departure %d more times from the lease, want none", n)
		}
		st, _ := e.n.Query(context.Background(), "alice")
		if len(st.Devices) != 0 {
			t.Fatalf("devices = %v, want none: the view's node told it", st.Devices)
		}
		e.expectDowns("gateway_down", 1) // the lease ended too
		e.expectStatuses(p, time.Minute, "0s online", "29.95s offline")
	})
}

// A view that may have moved here since the settle window began may be a
// new one that never had the device (the old one died with the member):
// the lease ended by the failure tells it.
func TestDepartureReachesAViewThatMayHaveMoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		timing.FailureDetection, timing.Settle = 7*time.Second, 5*time.Second // a cluster's (cluster.Timings)
		s, spy := spied(&fakeRoster{moved: true})
		e, g2, _, d := aliceOnSecondGateway(t, timing, s)
		time.Sleep(10 * time.Second)
		d.halt()
		g2.Crash()
		e.n.changedAt.Store(time.Now().UnixNano())
		e.n.onMember(cluster.Event{Kind: cluster.EventFailed, Member: cluster.Member{ID: "g2", State: cluster.Dead}})
		time.Sleep(time.Second)
		synctest.Wait()
		if n := spy.count("alice", "phone"); n != 1 {
			t.Fatalf("the lease told the view %d times, want once", n)
		}
	})
}

// A device up for a connection on a member this node declared dead is a
// ghost: sent before the member's failure by a lease elsewhere, it may
// reach the view after the view dropped the member's devices, and no lease
// would tell it again. The same from a member alive counts.
func TestDeviceUpFromADeadMemberIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := watchedAlice(t, config.Seed(), seams{members: &fakeRoster{gone: map[string]bool{"dead:1": true}}})
		up := func(addr, device string) {
			h := &messages.Holder{Node: "g9", ConnId: "g9-" + device, Epoch: 1, Gateway: &messages.PidRef{Address: addr, Id: "gateway-g9"}}
			e.n.dir.Send(KindView, "alice", &messages.DeviceUp{User: "alice", Device: device, Holder: h, SinceMs: time.Now().UnixMilli()})
		}
		up("dead:1", "phone")
		up("alive:1", "laptop")
		time.Sleep(time.Second)
		synctest.Wait()
		st, _ := e.n.Query(context.Background(), "alice")
		if len(st.Devices) != 1 || st.Devices[0].Device != "laptop" {
			t.Fatalf("devices = %v, want only the laptop", st.Devices)
		}
	})
}
