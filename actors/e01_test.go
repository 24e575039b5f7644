package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// E01 6.1 "主动关闭（300 秒） | 320 秒发布离线，恰好等于去抖": a graceful
// close at 300 s is published offline at exactly 320 s, less the 50 ms the
// debounce keeps for the event's way to the subscriber
// (core.DeliveryBudget).
func TestGracefulClosePublishesAtDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, p := watchedAlice(t, config.Seed())
		d := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(300 * time.Second)
		d.close()
		e.expectStatuses(p, 60*time.Second, "0s online", "5m19.95s offline")
	})
}

// E01 6.1 "丢一次心跳 | 不发布离线": one lost heartbeat never closes a
// connection (stale 75 s > 2 x 30 s).
func TestOneLostHeartbeatPublishesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, p := watchedAlice(t, config.Seed())
		d := e.connect(e.n.Gateway(), "alice", "phone", 1, 3)
		e.expectStatuses(p, 10*time.Minute, "0s online")
		if d.sock.closeCode() != 0 {
			t.Fatalf("connection closed with %d", d.sock.closeCode())
		}
	})
}

// E01 6.1 "两台设备先后离开 | 只在最后一台离开 20 秒后发布离线".
func TestTwoDevicesOfflineOnlyAfterLastLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, p := watchedAlice(t, config.Seed())
		phone := e.connect(e.n.Gateway(), "alice", "phone", 1)
		laptop := e.connect(e.n.Gateway(), "alice", "laptop", 1)
		time.Sleep(100 * time.Second)
		phone.close()
		time.Sleep(100 * time.Second)
		laptop.close()
		e.expectStatuses(p, 100*time.Second, "0s online", "3m39.95s offline")
	})
}

// E01 6.1 "关闭后 10 秒内重连 | 订阅者没有看到任何变化".
func TestReconnectWithinDebouncePublishesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, p := watchedAlice(t, config.Seed())
		d := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(100 * time.Second)
		d.close()
		time.Sleep(10 * time.Second)
		e.connect(e.n.Gateway(), "alice", "phone", 2)
		e.expectStatuses(p, 5*time.Minute, "0s online")
	})
}

// E01 6.1 "旧网关的下线消息迟到 30 秒，设备已在新网关重连 | 下线被拒绝
// （rejected_stale=1），租约归属仍为新网关". The takeover also closes the
// old socket with 4001.
func TestLateCloseFromOldEpochIsRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		g2, err := e.n.StartGateway("g2")
		if err != nil {
			t.Fatal(err)
		}
		e.policy("alice", core.Exact, "bob")
		p := e.subscribe("alice", "bob")
		old := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(100 * time.Second)
		old.halt()
		e.connect(g2, "alice", "phone", 2)
		synctest.Wait()
		if c := old.sock.closeCode(); c != messages.CloseSuperseded {
			t.Fatalf("old socket closed with %d, want %d", c, messages.CloseSuperseded)
		}
		time.Sleep(30 * time.Second)
		e.n.dir.Send(KindLease, leaseID("alice", "phone"), &messages.LeaseRelease{
			User: "alice", Device: "phone", ConnId: old.conn.ID, Epoch: 1, Reason: messages.EndReason_close, LastAliveMs: time.Now().UnixMilli(),
		})
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if n := testutil.ToFloat64(e.n.metrics.RejectedStale.WithLabelValues("release")); n != 1 {
			t.Fatalf("rejected stale releases = %v, want 1", n)
		}
		st, err := e.n.Query(context.Background(), "alice")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Devices) != 1 || st.Devices[0].Node != "g2" || st.Devices[0].Epoch != 2 {
			t.Fatalf("devices = %v, want phone on g2 with epoch 2", st.Devices)
		}
		e.expectStatuses(p, 0, "0s online")
	})
}

// Negative control for the test above: without epoch fencing the late
// close would have removed the new owner. Releasing with the new epoch (what
// an unfenced release amounts to) does remove it, so the assertion above can
// fail.
func TestReleaseWithCurrentEpochRemovesOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, p := watchedAlice(t, config.Seed())
		d := e.connect(e.n.Gateway(), "alice", "phone", 2)
		time.Sleep(30 * time.Second)
		e.n.dir.Send(KindLease, leaseID("alice", "phone"), &messages.LeaseRelease{
			User: "alice", Device: "phone", ConnId: d.conn.ID, Epoch: 2, Reason: messages.EndReason_close, LastAliveMs: time.Now().UnixMilli(),
		})
		e.expectStatuses(p, time.Minute, "0s online", "49.95s offline")
	})
}

// E01 6.2: a half-open device (silent, socket never closed) is published
// offline within stale + check + debounce, by the gateway's check.
func TestHalfOpenDetectedWithinBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		e, p := watchedAlice(t, timing)
		d := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(300 * time.Second)
		d.halt()
		left := time.Now()
		off := e.expectOfflineSecond(p, 5*time.Minute)
		lat, bound := off.at.Sub(left), timing.Bounds().HalfOpen
		if lat > bound || lat < timing.Stale-timing.Heartbeat+timing.Debounce {
			t.Fatalf("half-open detected after %v, want within (stale - heartbeat + debounce, %v]", lat, bound)
		}
		if c := d.sock.closeCode(); c != messages.CloseGoingAway {
			t.Fatalf("stale socket closed with %d, want %d", c, messages.CloseGoingAway)
		}
		e.expectDowns("ping_timeout", 1)
	})
}

// E01 6.2: a crashed gateway's devices are published offline by lease
// expiry, within TTL + debounce and never before last renewal + TTL.
func TestGatewayCrashDetectedByLeaseExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		e, g2, p, d := aliceOnSecondGateway(t, timing)
		time.Sleep(300 * time.Second)
		renewals := testutil.ToFloat64(e.n.metrics.Renewals)
		d.halt()
		g2.Crash()
		crashed := time.Now()
		if renewals < 3 {
			t.Fatalf("%v renewals in 300 s, want >= 3", renewals)
		}
		lat := e.expectOfflineSecond(p, 5*time.Minute).at.Sub(crashed)
		// The last renewal came at most renew x 1.1 before the crash.
		lower := timing.TTL - time.Duration(float64(timing.Renew)*(1+timing.RenewJitter)) + timing.Debounce
		if lat > timing.Bounds().GatewayCrash || lat < lower {
			t.Fatalf("crash detected after %v, want within [%v, %v]", lat, lower, timing.Bounds().GatewayCrash)
		}
		e.expectDowns("lease_expired", 1)
	})
}

// A failed member's leases are reclaimed (GatewayDown) at once, not after
// TTL.
func TestGatewayDownReclaimsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		e, g2, p, d := aliceOnSecondGateway(t, timing)
		keep := e.connect(e.n.Gateway(), "alice", "laptop", 1) // on a live node: untouched
		time.Sleep(100 * time.Second)
		d.halt()
		g2.Crash()
		// As the gossip reports it: every lease and view here hears of it.
		e.n.onMember(cluster.Event{Kind: cluster.EventFailed, Member: cluster.Member{ID: "g2", State: cluster.Dead}})
		time.Sleep(time.Second)
		synctest.Wait()
		st, _ := e.n.Query(context.Background(), "alice")
		if len(st.Devices) != 1 || st.Devices[0].Device != "laptop" {
			t.Fatalf("devices = %v, want only the laptop", st.Devices)
		}
		keep.close()
		e.expectStatuses(p, time.Minute, "0s online", "2m0.95s offline")
	})
}

// E01 6.3 at actor scale: 200 connections opened in the same instant renew
// spread over the interval, not together.
func TestJitterSpreadsSynchronizedRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		e := newEnv(t, timing)
		const n = 200
		for i := range n {
			e.connect(e.n.Gateway(), fmt.Sprintf("u%d", i), "d", 1)
		}
		peak, prev := 0.0, 0.0
		for range 180 {
			time.Sleep(time.Second)
			synctest.Wait()
			cur := testutil.ToFloat64(e.n.metrics.Renewals)
			peak, prev = max(peak, cur-prev), cur
		}
		// Uniform over 60 s is 3.3/s on average; all together would be 200.
		if prev < 2*n || peak > n/10 {
			t.Fatalf("%v renewals in 180 s with a peak of %v/s, want >= %d and a peak <= %d/s", prev, peak, 2*n, n/10)
		}
	})
}

// Configurations breaking a rule never start.
func TestInvalidTimingRefused(t *testing.T) {
	bad := config.Seed()
	bad.TTL = 50 * time.Second
	_, err := Start(Deps{NodeID: "g1", Timing: bad, Policies: store.NewMemoryPolicies(), History: store.NewMemoryHistory()})
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "ttl") {
		t.Fatalf("err = %v, want config.ErrInvalid naming ttl", err)
	}
}

// aliceOnSecondGateway is a node with a second gateway g2, alice's phone
// connected to g2, and bob subscribed to alice (who lets him see her).
func aliceOnSecondGateway(t *testing.T, timing config.Timing, s ...seams) (*env, *Gateway, *probe, *device) {
	e, p := watchedAlice(t, timing, s...)
	g2, _ := e.n.StartGateway("g2")
	return e, g2, p, e.connect(g2, "alice", "phone", 1)
}
