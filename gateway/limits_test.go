package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// answer sends a subscribe and returns its answer: the snapshot or the
// error frame with its request id.
func answer(t *testing.T, c *client.Conn, id string, targets ...string) *messages.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Subscribe(ctx, id, targets...); err != nil {
		t.Fatal(err)
	}
	return next(t, c, 2*time.Second, func(f *messages.Frame) bool {
		return f.GetSnapshot().GetRequestId() == id || f.GetError().GetRequestId() == id
	})
}

// refused fails unless the node counted want refusals by limit.
func refused(t *testing.T, nd *node, limit string, want float64) {
	t.Helper()
	if got := testutil.ToFloat64(nd.n.Metrics().Refused.WithLabelValues(limit)); got != want {
		t.Fatalf("presence_limit_refusals_total{limit=%q} = %v, want %v", limit, got, want)
	}
}

// A connection holds at most max-subscriptions targets over all its
// subscribes: one more is refused whole with an error frame 413 naming the
// limit, activates no view, and leaves the subscriptions it has working;
// an unsubscribe makes room.
func TestSubscriptionLimitPerConnection(t *testing.T) {
	nd := startNode(t, func(_ *Options, d *actors.Deps) { d.Limits.Subscriptions = 3 })
	c := nd.dial("bob", "phone", 1)
	if f := answer(t, c, "s1", "ann", "cat"); f.GetSnapshot() == nil {
		t.Fatalf("s1 = %v, want a snapshot", f)
	}
	views := nd.n.Counts()["view"]
	f := answer(t, c, "s2", "dan", "eve")
	if e := f.GetError(); e.GetCode() != uint32(messages.ErrTooManySubscriptions) || !strings.Contains(e.GetMessage(), "max-subscriptions") {
		t.Fatalf("s2 = %v, want error 413 naming max-subscriptions", f)
	}
	if v := nd.n.Counts()["view"]; v != views {
		t.Fatalf("views %d -> %d after a refused subscribe", views, v)
	}
	refused(t, nd, actors.LimitSubscriptions, 1)
	if f := answer(t, c, "s3", "ann", "dan"); f.GetSnapshot() == nil { // one new: 3
		t.Fatalf("s3 = %v, want a snapshot", f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Unsubscribe(ctx, "dan"); err != nil {
		t.Fatal(err)
	}
	if f := answer(t, c, "s4", "eve"); f.GetSnapshot() == nil {
		t.Fatalf("s4 after an unsubscribe = %v, want a snapshot", f)
	}
	// What was subscribed before the refusal still gets its events.
	nd.policy("cat", "bob")
	nd.dial("cat", "phone", 1)
	next(t, c, 2*time.Second, func(f *messages.Frame) bool {
		return f.GetPresence().GetUser() == "cat" && f.GetPresence().GetStatus() == messages.Status_online
	})
}

// A connection sends at most subscribe-burst subscribes at once and
// subscribe-rate a second: one more is refused with an error frame 429
// whose retry_after_ms is long enough, and activates no view.
func TestSubscribeRatePerConnection(t *testing.T) {
	nd := startNode(t, func(o *Options, _ *actors.Deps) { o.SubscribeRate, o.SubscribeBurst = 20, 2 })
	c := nd.dial("bob", "phone", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, id := range []string{"s1", "s2", "s3"} {
		if err := c.Subscribe(ctx, id, "for-"+id); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]*messages.Frame{}
	for len(got) < 3 {
		f := next(t, c, 2*time.Second, func(f *messages.Frame) bool { return f.GetSnapshot() != nil || f.GetError() != nil })
		got[f.GetSnapshot().GetRequestId()+f.GetError().GetRequestId()] = f
	}
	e := got["s3"].GetError()
	if got["s1"].GetSnapshot() == nil || got["s2"].GetSnapshot() == nil || e.GetCode() != uint32(messages.ErrSlowDown) ||
		e.GetRetryAfterMs() < 1 || e.GetRetryAfterMs() > 50 || !strings.Contains(e.GetMessage(), "subscribe-rate") {
		t.Fatalf("answers = %v, want snapshots for s1 and s2, error 429 for s3 with retry_after_ms in [1, 50] naming subscribe-rate", got)
	}
	refused(t, nd, actors.LimitSubscribeRate, 1)
	views := nd.n.Counts()["view"] // bob's own, for-s1 and for-s2
	if views != 3 {
		t.Fatalf("views = %d, want 3: the refused subscribe activated one", views)
	}
	time.Sleep(time.Duration(e.GetRetryAfterMs()) * time.Millisecond) // what the frame says to wait
	if f := answer(t, c, "s3", "for-s3"); f.GetSnapshot() == nil {
		t.Fatalf("s3 after retry_after_ms = %v, want a snapshot", f)
	}
}

// A user has at most max-devices devices online: the handshake of one more
// is 403 naming the limit and writes nothing; a device online already
// reconnects.
func TestDevicesPerUserHandshake403(t *testing.T) {
	nd := startNode(t, func(_ *Options, d *actors.Deps) { d.Limits.Devices = 1 })
	old := nd.dial("alice", "phone", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := upgradeRequest(nd.url() + "?attempt=3")
	r.Header.Set("Authorization", "Bearer "+nd.token("alice", "laptop"))
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 403 || !strings.Contains(string(body), "max-devices 1") {
		t.Fatalf("second device = %d %q, want 403 naming max-devices 1", res.StatusCode, body)
	}
	// The Go SDK sees a refused handshake and keeps trying with backoff.
	var he *client.HandshakeError
	if _, err := client.Dial(ctx, nd.url(), client.DialOptions{Token: nd.token("alice", "laptop"), Attempt: 4}); !errors.As(err, &he) || he.Status != 403 {
		t.Fatalf("second device through the SDK = %v, want a 403 HandshakeError", err)
	}
	if d := nd.route("alice"); len(d) != 1 || d[0].Device != "phone" {
		t.Fatalf("alice = %v, want the phone alone", d)
	}
	refused(t, nd, actors.LimitDevices, 2)
	if floor, _ := nd.history.Floor(ctx, "alice", "laptop"); floor != 0 {
		t.Fatalf("laptop's floor = %d after a 403, want 0", floor)
	}
	if c := nd.n.Counts(); c["connection"] != 1 || c["lease"] != 1 {
		t.Fatalf("counts = %v, want one connection and one lease", c)
	}
	nd.dial("alice", "phone", 2) // a reconnect of the device online
	if code := closeCode(t, old, 2*time.Second); code != int(messages.CloseSuperseded) {
		t.Fatalf("old phone connection closed with %d, want %d", code, messages.CloseSuperseded)
	}
}
