package actors

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A fan-out backlog over --degrade-at degrades the node's batched
// subscriptions: bob is told to pull alice and carol, gets none of their
// changes pushed (realtime dan still is), pulls with a query; a batched
// subscribe meanwhile is degraded too; once the backlog stays under
// --degrade-below for --restore-after he gets restored and a snapshot of
// the latest state, and alice's changes are batched again.
func TestDegradedModeAndRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		deg := config.Degrade{At: 500 * time.Millisecond, Below: 100 * time.Millisecond, RestoreAfter: time.Second, Pull: 2 * time.Second}
		e := newEnvWith(t, Deps{Timing: timing, Degrade: deg})
		for _, u := range []string{"alice", "carol", "dan", "erin"} {
			e.policy(u, core.Exact, "bob")
		}
		bob := e.connect(e.n.Gateway(), "bob", "laptop", 1)
		bob.conn.Subscribe("s1", []string{"alice", "carol"}, messages.Tier_batched)
		bob.conn.Subscribe("s2", []string{"dan"}, messages.Tier_realtime)
		synctest.Wait()
		e.n.hub.took(time.Second) // an event's fan-out took a second
		time.Sleep(degradeTick)
		synctest.Wait()
		sent := func() []*messages.Frame { return bob.sock.sent() }
		last := func() *messages.Frame { f := sent(); return f[len(f)-1] }
		if d := last().GetDegraded(); d.GetRetryAfterMs() != 2000 || strings.Join(d.GetTargets(), ",") != "alice,carol" {
			t.Fatalf("after the backlog: %v, want degraded{2000, alice carol}", frameNames(sent()))
		}
		if testutil.ToFloat64(e.n.metrics.Degraded) != 1 || testutil.ToFloat64(e.n.metrics.DegradedConnections) != 1 {
			t.Fatal("presence_degraded or presence_degraded_connections_total not counted")
		}
		if st := e.n.ClusterCounts(t.Context()); st.Degraded["g1"] != time.Now().UnixMilli() { // the dashboard's card
			t.Fatalf("ClusterCounts.Degraded = %v, want g1 since now", st.Degraded)
		}
		n := len(sent())
		alice := e.connect(e.n.Gateway(), "alice", "phone", 1)
		dan := e.connect(e.n.Gateway(), "dan", "phone", 1)
		time.Sleep(3 * timing.BatchWindow)
		synctest.Wait()
		if got := frameNames(sent()[n:]); strings.Join(got, "|") != "presence dan online" {
			t.Fatalf("while degraded: %v, want dan's realtime change only", got)
		}
		bob.conn.Query("pull", []string{"alice", "carol"})
		bob.conn.Subscribe("s3", []string{"erin"}, messages.Tier_batched)
		synctest.Wait()
		got := frameNames(sent()[n+1:])
		slices.Sort(got) // the query's and the subscribe's answers come in any order
		if want := "degraded(2000)[erin]|snapshot(pull)[alice online,carol offline]|snapshot(s3)[erin offline]"; strings.Join(got, "|") != want {
			t.Fatalf("pull and a batched subscribe while degraded: %v, want %s", got, want)
		}
		n = len(sent())
		time.Sleep(deg.RestoreAfter + 2*degradeTick)
		synctest.Wait()
		got = frameNames(sent()[n:])
		if strings.Join(got, "|") != "restored|snapshot(restored)[alice online,carol offline,erin offline]" {
			t.Fatalf("after the restore: %v, want restored and the snapshot", got)
		}
		if st := e.n.ClusterCounts(t.Context()); len(st.Degraded) != 0 {
			t.Fatalf("ClusterCounts.Degraded = %v after the restore", st.Degraded)
		}
		if testutil.ToFloat64(e.n.metrics.Degraded) != 0 || testutil.ToFloat64(e.n.metrics.DegradedSeconds) < deg.RestoreAfter.Seconds() {
			t.Fatalf("presence_degraded %v, presence_degraded_seconds_total %v", testutil.ToFloat64(e.n.metrics.Degraded), testutil.ToFloat64(e.n.metrics.DegradedSeconds))
		}
		n = len(sent())
		alice.conn.SetShow(messages.Show_dnd)
		time.Sleep(2 * timing.BatchWindow)
		synctest.Wait()
		if got := frameNames(sent()[n:]); strings.Join(got, "|") != "batch[alice online]" {
			t.Fatalf("pushed again: %v", got)
		}
		alice.close()
		dan.close()
		bob.close()
	})
}
