package actors

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// frameNames names a socket's frames: snapshot(request)[user status...],
// presence user status, batch[user status, ...], error code.
func frameNames(fs []*messages.Frame) []string {
	var out []string
	ps := func(list []*messages.Presence) string {
		var s []string
		for _, p := range list {
			s = append(s, p.GetUser()+" "+p.GetStatus().String())
		}
		slices.Sort(s) // a snapshot's parts come in any order
		return strings.Join(s, ",")
	}
	for _, f := range fs {
		switch {
		case f.GetSnapshot() != nil:
			out = append(out, fmt.Sprintf("snapshot(%s)[%s]", f.GetSnapshot().GetRequestId(), ps(f.GetSnapshot().GetPresences())))
		case f.GetPresence() != nil:
			out = append(out, "presence "+ps([]*messages.Presence{f.GetPresence()}))
		case f.GetPresenceBatch() != nil:
			out = append(out, "batch["+ps(f.GetPresenceBatch().GetPresences())+"]")
		case f.GetDegraded() != nil:
			out = append(out, fmt.Sprintf("degraded(%d)[%s]", f.GetDegraded().GetRetryAfterMs(), strings.Join(f.GetDegraded().GetTargets(), ",")))
		case f.GetRestored() != nil:
			out = append(out, "restored")
		case f.GetError() != nil:
			out = append(out, fmt.Sprintf("error %d", f.GetError().GetCode()))
		}
	}
	return out
}

// A batched subscription's changes come once per batch window, merged:
// alice and carol coming online are one batch a window after the first;
// alice's show going away and back within a window sends nothing; a
// realtime subscriber of alice on the same node gets every change at
// once.
func TestBatchedTierMergesAWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e := newEnv(t, timing)
		e.policy("alice", core.Exact, "bob", "dan")
		e.policy("carol", core.Exact, "bob")
		bob := e.connect(e.n.Gateway(), "bob", "laptop", 1)
		dan := e.connect(e.n.Gateway(), "dan", "laptop", 1)
		bob.conn.Subscribe("s1", []string{"alice", "carol"}, messages.Tier_batched)
		dan.conn.Subscribe("s1", []string{"alice"}, messages.Tier_realtime)
		synctest.Wait()
		alice := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(timing.BatchWindow / 4)
		carol := e.connect(e.n.Gateway(), "carol", "phone", 1)
		synctest.Wait()
		if got := frameNames(bob.sock.sent()); strings.Join(got, "|") != "snapshot(s1)[alice offline,carol offline]" {
			t.Fatalf("bob before the window's end: %v", got)
		}
		time.Sleep(timing.BatchWindow)
		synctest.Wait()
		if got := frameNames(bob.sock.sent()); strings.Join(got, "|") != "snapshot(s1)[alice offline,carol offline]|batch[alice online,carol online]" {
			t.Fatalf("bob after the window: %v", got)
		}
		unchanged := testutil.ToFloat64(e.n.metrics.BatchUnchanged)
		alice.conn.SetShow(messages.Show_away)
		synctest.Wait()
		alice.conn.SetShow(messages.Show_available)
		time.Sleep(2 * timing.BatchWindow)
		synctest.Wait()
		if got := bob.sock.sent(); len(got) != 2 {
			t.Fatalf("a flap within a window was sent: %v", frameNames(got))
		}
		if d := testutil.ToFloat64(e.n.metrics.BatchUnchanged) - unchanged; d != 1 {
			t.Fatalf("presence_batch_unchanged_total grew by %v, want 1", d)
		}
		if got := frameNames(dan.sock.sent()); len(got) != 4 { // snapshot, online, away, available
			t.Fatalf("the realtime subscriber got %v, want every change", got)
		}
		frames := func(tier string) float64 { return testutil.ToFloat64(e.n.metrics.FanoutFrames.WithLabelValues(tier)) }
		if frames("batched") != 1 || frames("realtime") != 3 {
			t.Fatalf("presence_fanout_frames_total batched %v realtime %v, want 1 and 3", frames("batched"), frames("realtime"))
		}
		// Versions grow across tiers and windows.
		var last uint64
		for _, f := range bob.sock.sent()[1].GetPresenceBatch().GetPresences() {
			if f.GetUser() == "alice" {
				last = f.GetVersion()
			}
		}
		alice.conn.SetShow(messages.Show_dnd)
		time.Sleep(2 * timing.BatchWindow)
		synctest.Wait()
		got := bob.sock.sent()
		if len(got) != 3 || got[2].GetPresenceBatch().GetPresences()[0].GetVersion() <= last {
			t.Fatalf("the next change: %v (version after %d)", frameNames(got), last)
		}
		alice.close()
		carol.close()
		bob.close()
		dan.close()
	})
}

// A connection that ends with a merged change waiting sends nothing more
// and leaves no timer firing into it.
func TestBatchedTierStopsWithTheConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e := newEnv(t, timing)
		e.policy("alice", core.Exact, "bob")
		bob := e.connect(e.n.Gateway(), "bob", "laptop", 1)
		bob.conn.Subscribe("s1", []string{"alice"}, messages.Tier_batched)
		synctest.Wait()
		alice := e.connect(e.n.Gateway(), "alice", "phone", 1)
		synctest.Wait()
		bob.close()
		time.Sleep(2 * timing.BatchWindow)
		synctest.Wait()
		if got := frameNames(bob.sock.sent()); len(got) != 1 {
			t.Fatalf("an ended connection was sent %v", got)
		}
		alice.close()
	})
}

// A query answers one snapshot with what the viewer may see (a hidden
// target absent), subscribes nothing (a later change is not sent), and
// the views it woke passivate after idle; queries over the bounds are
// refused with an error frame naming the rule.
func TestQueryAnswersOnceAndLeavesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e := newEnv(t, timing)
		e.policy("alice", core.Exact, "bob")
		e.policy("carol", core.Exact) // bob is no contact
		alice := e.connect(e.n.Gateway(), "alice", "phone", 1)
		bob := e.connect(e.n.Gateway(), "bob", "laptop", 1)
		bob.conn.Query("q1", []string{"alice", "carol", "dave"})
		synctest.Wait()
		if got := frameNames(bob.sock.sent()); strings.Join(got, "|") != "snapshot(q1)[alice online]" {
			t.Fatalf("query answer: %v", got)
		}
		alice.conn.SetShow(messages.Show_away)
		synctest.Wait()
		if got := bob.sock.sent(); len(got) != 1 {
			t.Fatalf("a change after a query was sent: %v", frameNames(got))
		}
		// Nothing held for bob: no subscription, no query waiting.
		if rt, bt, subscribers := e.n.hub.subscriptions(); rt+bt+subscribers != 0 {
			t.Fatalf("after the query: %d realtime and %d batched subscriptions, %d subscribers; want none", rt, bt, subscribers)
		}
		passivated := func(k Kind) float64 { return testutil.ToFloat64(e.n.metrics.Passivations.WithLabelValues(string(k))) }
		alice.close()
		time.Sleep(timing.Debounce + timing.Idle + time.Second)
		synctest.Wait()
		// bob's own lease and view live while he is connected; alice's,
		// carol's and dave's, woken by the query, passivated (carol's and
		// dave's hold nothing: at once), as did alice's lease.
		if c := e.n.Counts(); c["view"] != 1 || c["lease"] != 1 {
			t.Fatalf("counts after idle = %v, want bob's lease and view only", c)
		}
		if v, l := passivated(KindView), passivated(KindLease); v != 3 || l != 1 {
			t.Fatalf("passivations: views %v, leases %v; want 3 (alice's, carol's and dave's) and 1 (alice's)", v, l)
		}
		for _, tc := range []struct {
			targets []string
			code    messages.ErrorCode
			want    string
		}{
			{nil, messages.ErrBadRequest, "query: 0 targets"},
			{[]string{"a/b"}, messages.ErrBadRequest, "target"},
		} {
			n := len(bob.sock.sent())
			bob.conn.Query("bad", tc.targets)
			synctest.Wait()
			got := bob.sock.sent()
			if len(got) != n+1 || got[n].GetError().GetCode() != uint32(tc.code) || !strings.Contains(got[n].GetError().GetMessage(), tc.want) {
				t.Fatalf("query %v: %v, want error %d naming %q", tc.targets, frameNames(got[n:]), tc.code, tc.want)
			}
		}
		bob.close()
	})
}

// presence_lookups_total counts each admin lookup by its answer: the
// empty-answer rate is offline and unknown over all.
func TestLookupAnswersCounted(t *testing.T) {
	m := NewMetrics(nil)
	m.CountLookup(&messages.ViewState{Online: true}, nil)
	m.CountLookup(&messages.ViewState{}, nil)
	m.CountLookup(nil, ErrSettling)
	m.CountLookup(&messages.ViewState{Settling: true}, ErrSettling)
	for answer, want := range map[string]float64{AnswerOnline: 1, AnswerOffline: 1, AnswerUnknown: 2} {
		if got := testutil.ToFloat64(m.Lookups.WithLabelValues(answer)); got != want {
			t.Errorf("%s: %v, want %v", answer, got, want)
		}
	}
}

// A query still waiting when the membership changes (a view it asked may
// have died with its node) is dropped and answered 503, so that it does
// not hold one of the connection's waiting slots for ever.
func TestQueryDroppedOnAMembershipChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e := newEnv(t, timing)
		bob := e.connect(e.n.Gateway(), "bob", "laptop", 1)
		bob.conn.Subscribe("s1", []string{"alice"}, messages.Tier_realtime) // in the hub
		synctest.Wait()
		o, ok := e.n.hub.load(bob.conn.pid.GetId())
		if !ok {
			t.Fatal("bob is not in the hub")
		}
		o.mu.Lock()
		_, err := o.sink.Query("lost", []string{"zed"}) // as if zed's view died before answering
		o.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		e.n.root.Send(e.n.Gateway().pid, topologyChanged{})
		time.Sleep(timing.Renew)
		synctest.Wait()
		got := bob.sock.sent()
		last := got[len(got)-1].GetError()
		if last.GetCode() != uint32(messages.ErrAgain) || last.GetRequestId() != "lost" {
			t.Fatalf("frames %v, want error 503 for the lost query", frameNames(got))
		}
		o.mu.Lock()
		left := o.sink.Queries()
		o.mu.Unlock()
		if left != 0 {
			t.Fatalf("%d queries still waiting", left)
		}
		bob.close()
	})
}

// gathered is c's samples, by name and labels as exposed
// (`name{label="value"}`; a histogram's _count and _sum).
func gathered(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += fmt.Sprintf("{%s=%q}", l.GetName(), l.GetValue())
			}
			switch {
			case m.GetHistogram() != nil:
				out[name+"_count"] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"] = m.GetHistogram().GetSampleSum()
			case m.GetGauge() != nil:
				out[name] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[name] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// The amplification's parts (seed 004 §4.4): presence_changes_total counts
// every change a view publishes by kind (online/offline as status, a show
// as state), presence_subscriptions and presence_subscribers the
// subscribers served, by tier, and presence_batch_presences the presences
// of each presence_batch frame; the subscriptions go when the connections
// do.
func TestAmplificationMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e := newEnv(t, timing)
		e.policy("alice", core.Exact, "bob", "dan")
		e.policy("carol", core.Exact, "bob")
		bob := e.connect(e.n.Gateway(), "bob", "laptop", 1)
		dan := e.connect(e.n.Gateway(), "dan", "laptop", 1)
		bob.conn.Subscribe("s1", []string{"alice", "carol"}, messages.Tier_batched)
		dan.conn.Subscribe("s1", []string{"alice"}, messages.Tier_realtime)
		synctest.Wait()
		base := gathered(t, e.n.metrics.Changes)
		alice := e.connect(e.n.Gateway(), "alice", "phone", 1)
		carol := e.connect(e.n.Gateway(), "carol", "phone", 1)
		synctest.Wait()
		alice.conn.SetShow(messages.Show_away)
		time.Sleep(2 * timing.BatchWindow)
		synctest.Wait()
		changes := gathered(t, e.n.metrics.Changes)
		if s, st := changes[`presence_changes_total{kind="status"}`]-base[`presence_changes_total{kind="status"}`],
			changes[`presence_changes_total{kind="state"}`]-base[`presence_changes_total{kind="state"}`]; s != 2 || st != 1 {
			t.Fatalf("presence_changes_total grew by status %v, state %v; want 2 (alice and carol online) and 1 (alice away)", s, st)
		}
		// bob's one batch holds alice (away) and carol: one observation of 2.
		if b := gathered(t, e.n.metrics.BatchPresences); b["presence_batch_presences_count"] != 1 || b["presence_batch_presences_sum"] != 2 {
			t.Fatalf("presence_batch_presences %v, want one frame of 2 presences (frames %v)", b, frameNames(bob.sock.sent()))
		}
		g := gathered(t, e.n.Collector())
		if g[`presence_subscriptions{tier="batched"}`] != 2 || g[`presence_subscriptions{tier="realtime"}`] != 1 || g["presence_subscribers"] != 2 {
			t.Fatalf("subscriptions %v, %v, subscribers %v; want 2 batched (bob), 1 realtime (dan), 2 subscribers",
				g[`presence_subscriptions{tier="batched"}`], g[`presence_subscriptions{tier="realtime"}`], g["presence_subscribers"])
		}
		bob.close()
		dan.close()
		synctest.Wait()
		if g := gathered(t, e.n.Collector()); g[`presence_subscriptions{tier="batched"}`]+g[`presence_subscriptions{tier="realtime"}`]+g["presence_subscribers"] != 0 {
			t.Fatalf("after the subscribers left: %v", g)
		}
		alice.close()
		carol.close()
	})
}
