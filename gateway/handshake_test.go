package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The handshake checks of docs/protocol.md, in order, each with its status
// and headers; a failed handshake writes nothing: no lease, no floor moved, no
// connection actor.
func TestHandshakeChecksInOrder(t *testing.T) {
	nd := startNode(t, func(o *Options, _ *actors.Deps) { o.AdmitRate, o.AdmitBurst = 0.001, 5 }) // 1 dial + 4 handshakes past admission
	nd.dial("alice", "phone", 5)                                                                  // floor 5; uses one admission token
	good := func() *http.Request {
		r := upgradeRequest(nd.url() + "?attempt=9")
		r.Header.Set("Authorization", "Bearer "+nd.token("bob", "phone"))
		return r
	}
	cases := []struct {
		name   string
		mutate func(*http.Request)
		status int
		header string // a header the answer must carry
	}{
		{"not an upgrade", func(r *http.Request) { r.Header.Del("Upgrade") }, 400, ""},
		{"no key", func(r *http.Request) { r.Header.Del("Sec-WebSocket-Key") }, 400, ""},
		{"POST", func(r *http.Request) { r.Method = "POST" }, 400, ""},
		{"version 8", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Version", "8") }, 426, "Sec-WebSocket-Version"},
		{"version 8 and a bad token: version first", func(r *http.Request) {
			r.Header.Set("Sec-WebSocket-Version", "8")
			r.Header.Set("Authorization", "Bearer nope")
		}, 426, "Sec-WebSocket-Version"},
		{"bad token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, 401, ""},
		{"token of another secret", func(r *http.Request) {
			tok, _ := Tokens{Key: []byte("other")}.Mint("bob", "phone", time.Hour)
			r.Header.Set("Authorization", "Bearer "+tok)
		}, 401, ""},
		{"expired token", func(r *http.Request) {
			tok, _ := Tokens{Key: secret, Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }}.Mint("bob", "phone", time.Hour)
			r.Header.Set("Authorization", "Bearer "+tok)
		}, 401, ""},
		{"stale attempt", func(r *http.Request) {
			*r = *upgradeRequest(nd.url() + "?attempt=5")
			r.Header.Set("Authorization", "Bearer "+nd.token("alice", "phone"))
		}, 409, ""},
		{"admission bucket empty, and a bad token: admission first", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, 429, "Retry-After"},
	}
	for _, c := range cases {
		r := good()
		c.mutate(r)
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.status || (c.header != "" && res.Header.Get(c.header) == "") {
			t.Errorf("%s: %d %q (headers %v), want %d with %s", c.name, res.StatusCode, body, res.Header, c.status, c.header)
		}
	}
	if v := nd.srv.upgrader; v == nil {
		t.Fatal("no upgrader")
	}
	// Nothing was written by any refused handshake.
	if d := nd.route("bob"); len(d) != 0 {
		t.Fatalf("bob has devices %v after refused handshakes", d)
	}
	if d := nd.route("alice"); len(d) != 1 || d[0].Epoch != 5 {
		t.Fatalf("alice = %v, want the one epoch 5 connection", d)
	}
	if floor, _ := nd.history.Floor(context.Background(), "alice", "phone"); floor != 5 {
		t.Fatalf("alice's floor = %d, want 5", floor)
	}
	if c := nd.n.Counts()["connection"]; c != 1 {
		t.Fatalf("connection actors = %d, want 1", c)
	}
}

// Draining: new handshakes get 503 with Retry-After; devices are closed with
// 1001 and their leases released.
func TestDrain(t *testing.T) {
	nd := startNode(t)
	c := nd.dial("alice", "phone", 1)
	if err := nd.srv.Ready(); err != nil {
		t.Fatalf("listening gateway not ready: %v", err)
	}
	done := make(chan struct{})
	nd.srv.Drain(done)
	if err := nd.srv.Ready(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("draining gateway: Ready() = %v, want ErrNotReady", err)
	}
	if code := closeCode(t, c, 2*time.Second); code != int(messages.CloseGoingAway) {
		t.Fatalf("close code %d, want 1001", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := client.Dial(ctx, nd.url(), client.DialOptions{Token: nd.token("bob", "phone"), Attempt: 1})
	var he *client.HandshakeError
	if !errors.As(err, &he) || he.Status != 503 || he.RetryAfter != time.Second {
		t.Fatalf("handshake while draining: %v, want 503 with Retry-After 1", err)
	}
	eventually(t, 2*time.Second, "lease released", func() bool { return len(nd.route("alice")) == 0 })
}

// Refusing (a fenced node, before it closes its devices): new handshakes get
// 503 and the gateway is not ready; connected devices stay.
func TestRefuse(t *testing.T) {
	nd := startNode(t)
	c := nd.dial("alice", "phone", 1)
	nd.srv.Refuse()
	if err := nd.srv.Ready(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Ready() = %v, want ErrNotReady", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := client.Dial(ctx, nd.url(), client.DialOptions{Token: nd.token("bob", "phone"), Attempt: 1})
	var he *client.HandshakeError
	if !errors.As(err, &he) || he.Status != 503 {
		t.Fatalf("handshake while refusing: %v, want 503", err)
	}
	if err := c.Heartbeat(ctx, 1); err != nil {
		t.Fatalf("connected device: %v", err)
	}
	if f, err := c.Next(ctx); err != nil || f.GetHeartbeatAck() == nil {
		t.Fatalf("connected device got %v %v, want its heartbeat ack", f, err)
	}
}

// fullHistory is a history store whose write queue is full.
type fullHistory struct{ *store.MemoryHistory }

func (fullHistory) RaiseFloor(context.Context, string, string, uint64) error {
	return fmt.Errorf("store: raise floor: %w", store.ErrQueueFull)
}

// A store whose write queue is full: the handshake gets 503 with
// Retry-After and the reason, and nothing is left behind (no floor, no
// lease).
func TestHandshakeStoreQueueFull(t *testing.T) {
	full := fullHistory{store.NewMemoryHistory()}
	nd := startNode(t, func(_ *Options, d *actors.Deps) { d.History = full })
	r := upgradeRequest(nd.url() + "?attempt=1")
	r.Header.Set("Authorization", "Bearer "+nd.token("bob", "phone"))
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 503 || res.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), store.ErrQueueFull.Error()) {
		t.Fatalf("handshake with the store's queue full: %d %q (Retry-After %q), want 503, Retry-After 1 and the reason", res.StatusCode, body, res.Header.Get("Retry-After"))
	}
	ctx := context.Background()
	if f, _ := full.Floor(ctx, "bob", "phone"); f != 0 {
		t.Fatalf("floor %d after a refused handshake, want 0", f)
	}
	if r := nd.route("bob"); len(r) != 0 {
		t.Fatalf("route %v after a refused handshake, want none", r)
	}
}

// slowHistory holds every floor write until the test ends, as a paused
// store does.
type slowHistory struct {
	*store.MemoryHistory
	release chan struct{}
}

func (h slowHistory) RaiseFloor(ctx context.Context, user, device string, attempt uint64) error {
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return ctx.Err()
}

// TestStoreSlowHandshakeGets503: a handshake whose floor write hangs (a
// paused or slow store) is answered 503 with Retry-After before the
// server's read deadline on the request (twice Stale) cuts it without an
// answer, and nothing is left behind.
func TestStoreSlowHandshakeGets503(t *testing.T) {
	slow := slowHistory{store.NewMemoryHistory(), make(chan struct{})}
	defer close(slow.release)
	nd := startNode(t, func(_ *Options, d *actors.Deps) { d.History = slow })
	r := upgradeRequest(nd.url() + "?attempt=1")
	r.Header.Set("Authorization", "Bearer "+nd.token("bob", "phone"))
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatalf("handshake with the store hanging: %v, want 503 with Retry-After", err)
	}
	res.Body.Close()
	if res.StatusCode != 503 || res.Header.Get("Retry-After") != "1" {
		t.Fatalf("handshake with the store hanging: %d (Retry-After %q), want 503 and Retry-After 1", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if f, _ := slow.Floor(context.Background(), "bob", "phone"); f != 0 {
		t.Fatalf("floor %d after a refused handshake, want 0", f)
	}
}

// TestStoreSlowRetryIsNotSentTwice: a client tried again after a 503
// (Retry-After) with a new attempt, as the SDKs do, while the store still
// hangs. Each try reaches the server once: on a connection kept alive
// after the 503, nbio's read deadline ran from that answer and cut the
// next handshake as it waited, and the Go client sent that same attempt
// again, which a store that had meanwhile written its floor refused 409.
func TestStoreSlowRetryIsNotSentTwice(t *testing.T) {
	slow := slowHistory{store.NewMemoryHistory(), make(chan struct{})}
	defer close(slow.release)
	nd := startNode(t, func(_ *Options, d *actors.Deps) { d.History = slow })
	for attempt := uint64(1); attempt <= 2; attempt++ {
		_, err := client.Dial(context.Background(), nd.url(), client.DialOptions{Token: nd.token("bob", "phone"), Attempt: attempt})
		var he *client.HandshakeError
		if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || he.RetryAfter <= 0 {
			t.Fatalf("attempt %d with the store hanging: %v, want 503 with Retry-After", attempt, err)
		}
		if got := testutil.ToFloat64(nd.srv.metrics.handshakes.WithLabelValues("503")); got != float64(attempt) {
			t.Fatalf("after %d tries the server answered %v handshakes 503: a try was sent twice", attempt, got)
		}
		time.Sleep(he.RetryAfter)
	}
}
