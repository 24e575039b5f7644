package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Tiers and queries over the wire, on the JSON subprotocol: a batched
// subscription's change comes as a presence_batch, a query as a snapshot
// with its request id, nothing subscribed.
func TestTiersAndQueryOverTheWire(t *testing.T) {
	nd := startNode(t)
	nd.policy("alice", "bob")
	bob := nd.dial("bob", "laptop", 1)
	ctx := t.Context()
	nd.keepAlive(ctx, bob)
	if err := bob.SendRaw(ctx, false, []byte(`{"subscribe":{"request_id":"s1","targets":["alice"],"tier":"batched"}}`)); err != nil {
		t.Fatal(err)
	}
	next(t, bob, 2*time.Second, func(f *messages.Frame) bool { return f.GetSnapshot().GetRequestId() == "s1" })
	nd.keepAlive(ctx, nd.dial("alice", "phone", 1))
	f := next(t, bob, 2*time.Second, func(f *messages.Frame) bool { return f.GetPresence() != nil || f.GetPresenceBatch() != nil })
	if ps := f.GetPresenceBatch().GetPresences(); len(ps) != 1 || ps[0].GetUser() != "alice" || ps[0].GetStatus() != messages.Status_online {
		t.Fatalf("batched change: %v, want a presence_batch of alice online", f)
	}
	if err := bob.Query(ctx, "q1", "alice", "carol"); err != nil {
		t.Fatal(err)
	}
	f = next(t, bob, 2*time.Second, func(f *messages.Frame) bool { return f.GetSnapshot() != nil })
	if s := f.GetSnapshot(); s.GetRequestId() != "q1" || len(s.GetPresences()) != 1 || s.GetPresences()[0].GetStatus() != messages.Status_online {
		t.Fatalf("query answer %v, want q1 with alice online (carol hidden)", s)
	}
}

// Bad tiers and queries get an error frame naming the rule and change
// nothing: no view is asked (zed's, asleep, would be woken: presence_actor
// _activations_total), nothing is subscribed (presence_subscriptions) and
// no answer follows; a query beyond its bucket is 429 with retry_after_ms,
// and asks no view either.
func TestBadTiersAndQueries(t *testing.T) {
	nd := startNode(t, func(o *Options, _ *actors.Deps) { o.QueryRate, o.QueryBurst = 0.5, 2 })
	nd.policy("alice", "bob")
	bob := nd.dial("bob", "laptop", 1)
	ctx := t.Context()
	nd.keepAlive(ctx, bob)
	many := `"` + strings.Repeat(`a","`, 1000) + `a"`
	activations := func() float64 { return testutil.ToFloat64(nd.n.Metrics().Activations.WithLabelValues("view")) }
	// The views woken by the policy's change and bob's coming: a count
	// that holds for 300 ms.
	base := -1.0
	eventually(t, 5*time.Second, "the views settle", func() bool {
		v := activations()
		time.Sleep(300 * time.Millisecond)
		if v == activations() {
			base = v
			return true
		}
		return false
	})
	for _, tc := range []struct {
		raw  string
		code uint32
		rule string
	}{
		{`{"subscribe":{"request_id":"s1","targets":["zed"],"tier":"slow"}}`, 400, `subscribe: tier "slow": must be realtime or batched`},
		{`{"subscribe":{"request_id":"s2","targets":["zed"],"tier":7}}`, 400, "tier 7: must be realtime or batched"},
		{`{"query":{"request_id":"q1","targets":[]}}`, 400, "query: 0 targets: must be 1 to 1000"},
		{`{"query":{"request_id":"q2","targets":[` + many + `]}}`, 400, "query: 1001 targets"},
	} {
		if err := bob.SendRaw(ctx, false, []byte(tc.raw)); err != nil {
			t.Fatal(err)
		}
		f := next(t, bob, 2*time.Second, func(f *messages.Frame) bool { return f.GetError() != nil || f.GetSnapshot() != nil })
		if e := f.GetError(); e.GetCode() != tc.code || !strings.Contains(e.GetMessage(), tc.rule) {
			t.Fatalf("%.80s: %v, want error %d naming %q", tc.raw, f, tc.code, tc.rule)
		}
	}
	time.Sleep(300 * time.Millisecond) // a view asked would be active by then
	if a := activations(); a != base {
		t.Fatalf("views activated after refused requests: %v, before %v", a, base)
	}
	if s := subscribed(t, nd.n); s != 0 {
		t.Fatalf("%v subscriptions and subscribers after refused subscribes, want none", s)
	}
	// The bucket: the two refused queries took their tokens; the next is
	// refused with a wait, naming query-rate, and asks no view.
	if err := bob.Query(ctx, "q3", "zed"); err != nil {
		t.Fatal(err)
	}
	f := next(t, bob, 2*time.Second, func(f *messages.Frame) bool { return f.GetError() != nil || f.GetSnapshot() != nil })
	if e := f.GetError(); e.GetCode() != 429 || e.GetRetryAfterMs() == 0 || e.GetRequestId() != "q3" || !strings.Contains(e.GetMessage(), "query-rate") {
		t.Fatalf("third query: %v, want 429 naming query-rate", f)
	}
	time.Sleep(time.Duration(f.GetError().GetRetryAfterMs()) * time.Millisecond)
	if a := activations(); a != base {
		t.Fatalf("views activated after a query refused for its rate: %v, before %v", a, base)
	}
	if err := bob.Query(ctx, "q4", "alice"); err != nil {
		t.Fatal(err)
	}
	f = next(t, bob, 2*time.Second, func(f *messages.Frame) bool { return f.GetError() != nil || f.GetSnapshot() != nil })
	if f.GetSnapshot().GetRequestId() != "q4" {
		t.Fatalf("after the wait: %v, want q4's snapshot", f)
	}
}

// subscribed is the node's presence_subscriptions (both tiers) and
// presence_subscribers, summed.
func subscribed(t *testing.T, n *actors.Node) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(n.Collector())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() == "presence_subscriptions" || f.GetName() == "presence_subscribers" {
			for _, m := range f.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}
