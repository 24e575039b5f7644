package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/messages"
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
// nothing; a query beyond its bucket is 429 with retry_after_ms.
func TestBadTiersAndQueries(t *testing.T) {
	nd := startNode(t, func(o *Options, _ *actors.Deps) { o.QueryRate, o.QueryBurst = 0.5, 2 })
	nd.policy("alice", "bob")
	bob := nd.dial("bob", "laptop", 1)
	ctx := t.Context()
	nd.keepAlive(ctx, bob)
	many := `"` + strings.Repeat(`a","`, 1000) + `a"`
	// The views there are once the policy's change has activated alice's:
	// a count that holds for 300 ms.
	views := -1
	eventually(t, 5*time.Second, "the views settle", func() bool {
		v := nd.n.Counts()["view"]
		time.Sleep(300 * time.Millisecond)
		if v == nd.n.Counts()["view"] {
			views = v
			return true
		}
		return false
	})
	for _, tc := range []struct {
		raw  string
		code uint32
		rule string
	}{
		{`{"subscribe":{"request_id":"s1","targets":["alice"],"tier":"slow"}}`, 400, `subscribe: tier "slow": must be realtime or batched`},
		{`{"subscribe":{"request_id":"s2","targets":["alice"],"tier":7}}`, 400, "tier 7: must be realtime or batched"},
		{`{"query":{"request_id":"q1","targets":[]}}`, 400, "query: 0 targets: must be 1 to 1000"},
		{`{"query":{"request_id":"q2","targets":[` + many + `]}}`, 400, "query: 1001 targets"},
	} {
		if err := bob.SendRaw(ctx, false, []byte(tc.raw)); err != nil {
			t.Fatal(err)
		}
		f := next(t, bob, 2*time.Second, func(f *messages.Frame) bool { return f.GetError() != nil })
		if e := f.GetError(); e.GetCode() != tc.code || !strings.Contains(e.GetMessage(), tc.rule) {
			t.Fatalf("%.80s: error %v, want %d naming %q", tc.raw, e, tc.code, tc.rule)
		}
	}
	time.Sleep(300 * time.Millisecond)          // a view asked would be active by then
	if c := nd.n.Counts()["view"]; c != views { // no view was asked
		t.Fatalf("views after refused requests: %d, before %d", c, views)
	}
	// The bucket: the two refused queries took their tokens; the next is
	// refused with a wait, naming query-rate.
	if err := bob.Query(ctx, "q3", "alice"); err != nil {
		t.Fatal(err)
	}
	f := next(t, bob, 2*time.Second, func(f *messages.Frame) bool { return f.GetError() != nil || f.GetSnapshot() != nil })
	if e := f.GetError(); e.GetCode() != 429 || e.GetRetryAfterMs() == 0 || e.GetRequestId() != "q3" || !strings.Contains(e.GetMessage(), "query-rate") {
		t.Fatalf("third query: %v, want 429 naming query-rate", f)
	}
	time.Sleep(time.Duration(f.GetError().GetRetryAfterMs()) * time.Millisecond)
	if err := bob.Query(ctx, "q4", "alice"); err != nil {
		t.Fatal(err)
	}
	f = next(t, bob, 2*time.Second, func(f *messages.Frame) bool { return f.GetError() != nil || f.GetSnapshot() != nil })
	if f.GetSnapshot().GetRequestId() != "q4" {
		t.Fatalf("after the wait: %v, want q4's snapshot", f)
	}
}
