package actors

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// gauges reads leases held, devices online and users online.
func gauges(m *Metrics) [3]float64 {
	return [3]float64{testutil.ToFloat64(m.LeasesHeld), testutil.ToFloat64(m.DevicesOnline), testutil.ToFloat64(m.UsersOnline)}
}

func histogram(t *testing.T, h prometheus.Observer) *dto.Histogram {
	t.Helper()
	var out dto.Metric
	if err := h.(prometheus.Metric).Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram()
}

// The gauges follow a device up and its two ways down, and each published
// offline is observed under its leave mode, from the departure.
func TestStateGaugesAndDetectionByMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		e := newEnv(t, timing)
		e.policy("alice", core.Exact, "bob")
		d := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(time.Second)
		synctest.Wait()
		if g := gauges(e.n.metrics); g != [3]float64{1, 1, 1} {
			t.Fatalf("held, devices, users = %v, want 1 1 1", g)
		}
		if c := e.n.Counts()["connection"]; c != 1 {
			t.Fatalf("connections = %d, want 1", c)
		}
		d.close()
		time.Sleep(time.Minute)
		synctest.Wait()
		if g := gauges(e.n.metrics); g != [3]float64{0, 0, 0} {
			t.Fatalf("after close: held, devices, users = %v, want 0 0 0", g)
		}
		h := histogram(t, e.n.metrics.Detection.WithLabelValues(ModeClose))
		got := time.Duration(h.GetSampleSum() * float64(time.Second))
		if h.GetSampleCount() != 1 || got > timing.Bounds().GracefulClose || got < timing.Debounce-time.Second {
			t.Fatalf("close: %d observations, sum %v; want 1 within (debounce - 1 s, %v]", h.GetSampleCount(), got, timing.Bounds().GracefulClose)
		}
		d = e.connect(e.n.Gateway(), "alice", "phone", 2)
		time.Sleep(time.Minute)
		d.halt()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		h = histogram(t, e.n.metrics.Detection.WithLabelValues(ModeHalfOpen))
		got = time.Duration(h.GetSampleSum() * float64(time.Second))
		if h.GetSampleCount() != 1 || got > timing.Bounds().HalfOpen {
			t.Fatalf("half-open: %d observations, sum %v; want 1 within %v", h.GetSampleCount(), got, timing.Bounds().HalfOpen)
		}
		if g := gauges(e.n.metrics); g != [3]float64{0, 0, 0} {
			t.Fatalf("after half-open: held, devices, users = %v, want 0 0 0", g)
		}
	})
}

// A gateway crash's offline is observed from when this member last heard
// from the dead node, not from the failure detector's report: the figure is
// the detection plus the debounce, as the chaos harness measures it from
// the kill.
func TestGatewayCrashDetectionFromLastHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e, g2, _, d := aliceOnSecondGateway(t, timing)
		time.Sleep(10 * time.Second)
		heard := time.Now() // g2's last acked probe
		time.Sleep(100 * time.Millisecond)
		d.halt()
		g2.Crash()
		const detection = 800 * time.Millisecond // under the TTL: the gossip reclaims first
		time.Sleep(detection)
		e.n.onMember(cluster.Event{Kind: cluster.EventFailed, Member: cluster.Member{ID: "g2", State: cluster.Dead}, LastHeard: heard})
		time.Sleep(time.Second)
		synctest.Wait()
		h := histogram(t, e.n.metrics.Detection.WithLabelValues(ModeGatewayCrash))
		got := time.Duration(h.GetSampleSum() * float64(time.Second))
		publishAfter := timing.Debounce - core.DeliveryBudget(timing.Debounce)
		lo, hi := detection+publishAfter, 100*time.Millisecond+detection+publishAfter
		if h.GetSampleCount() != 1 || got < lo || got > hi {
			t.Fatalf("gateway_crash: %d observations, sum %v; want 1 within [%v, %v] (bound %v)", h.GetSampleCount(), got, lo, hi, timing.Bounds().GatewayCrash)
		}
		t.Logf("gateway_crash observed %v (detection %v + debounce, bound %v)", got, detection, timing.Bounds().GatewayCrash)
	})
}

// A sink re-attaching with the user online to a view that knows no device
// of hers (re-created after its node died with her gateway and lease) is
// told offline, with no departure to measure it from: the offline is
// counted in presence_offline_unmeasured_total, not lost, and not put in
// the histogram with a made-up latency.
func TestOfflineWithoutDepartureCountedUnmeasured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Fast())
		e.policy("alice", core.Exact, "bob")
		p := &probe{}
		pid := e.n.System().Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
		t.Cleanup(func() { _ = e.n.System().Root.StopFuture(pid).Wait() })
		online := &messages.Presence{User: "alice", Status: messages.Status_online, Show: messages.Show_available, Version: 7}
		for range 2 { // the second re-attach is told the same offline: counted once
			e.n.dir.Send(KindView, "alice", &messages.ViewSubscribe{Target: "alice", Viewer: "bob", Sink: refOf(pid), Reattach: true, Last: online})
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if ev := p.all(); len(ev) != 1 || ev[0].p.GetStatus() != messages.Status_offline {
			t.Fatalf("events = %v, want one offline", e.statuses(p))
		}
		h := histogram(t, e.n.metrics.Detection.WithLabelValues(ModeOwnerCrash))
		if n := testutil.ToFloat64(e.n.metrics.Unmeasured.WithLabelValues(ModeOwnerCrash)); n != 1 || h.GetSampleCount() != 0 {
			t.Fatalf("unmeasured %v, observed %d; want 1 and 0", n, h.GetSampleCount())
		}
		if n := testutil.ToFloat64(e.n.metrics.Published.WithLabelValues("offline")); n != 1 {
			t.Fatalf("published offlines %v, want 1 (the one subscribers saw)", n)
		}
	})
}
