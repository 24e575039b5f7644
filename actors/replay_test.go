package actors

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// With a failure detector (a cluster), a gateway keeps its connections'
// recent releases and sends them again after a membership change: one that
// was lost on its way to a dying lease owner still ends the device; one that
// already counted is refused by its epoch and changes nothing.
func TestGatewayReplaysRecentReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		timing.FailureDetection, timing.Settle = 25*time.Second, 40*time.Second
		e := newEnv(t, timing)
		e.policy("alice", core.Exact, "bob")
		e.policy("carol", core.Exact, "bob")
		p, q := e.subscribe("alice", "bob"), e.subscribe("carol", "bob")
		alice := e.connect(e.n.Gateway(), "alice", "phone", 1)
		carol := e.connect(e.n.Gateway(), "carol", "phone", 1)
		time.Sleep(time.Minute)
		carol.close() // counted now; its replay must change nothing
		time.Sleep(time.Minute)
		synctest.Wait()
		// alice's release "lost": the gateway only learns of it.
		lost := &messages.LeaseRelease{User: "alice", Device: "phone", ConnId: alice.conn.ID, Epoch: 1,
			Reason: messages.EndReason_close, LastAliveMs: time.Now().UnixMilli()}
		alice.halt()
		e.n.root.Send(e.n.Gateway().pid, released{rel: lost, at: time.Now()})
		e.n.root.Send(e.n.Gateway().pid, topologyChanged{})
		time.Sleep(time.Minute)
		synctest.Wait()
		if got, want := e.statuses(p), []string{"0s online", "2m19.95s offline"}; !slices.Equal(got, want) {
			t.Fatalf("alice: %v, want %v (the replayed release ends her)", got, want)
		}
		if got, want := e.statuses(q), []string{"0s online", "1m19.95s offline"}; !slices.Equal(got, want) {
			t.Fatalf("carol: %v, want %v (nothing more from her replay)", got, want)
		}
		if n := testutil.ToFloat64(e.n.metrics.RejectedStale.WithLabelValues("release")); n != 1 {
			t.Fatalf("stale releases refused = %v, want 1 (carol's replay)", n)
		}
	})
}

// The releases a gateway keeps for a replay age out by themselves: once
// the replay window has passed with no release after them, it holds none
// (it pruned only at the next release, so a node whose devices had all
// left kept the last window's releases, and up to maxRecent of them).
func TestGatewayForgetsReleasesAfterTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		timing.FailureDetection, timing.Settle = 25*time.Second, 40*time.Second
		e := newEnv(t, timing)
		g := e.n.Gateway()
		for _, user := range []string{"alice", "carol"} {
			e.connect(g, user, "phone", 1).close()
		}
		synctest.Wait()
		if n := g.kept.Load(); n != 2 {
			t.Fatalf("releases kept right after two closes: %d, want 2", n)
		}
		time.Sleep(timing.FailureDetection + timing.Settle + 2*timing.Check)
		synctest.Wait()
		if n := g.kept.Load(); n != 0 {
			t.Fatalf("releases kept a replay window after the last: %d, want 0", n)
		}
	})
}
