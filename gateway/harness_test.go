package gateway

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/internal/poll"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// nbio starts a package-level engine's task pool at init; it is not
	// ours to stop. Anything started by a test must be gone at the end.
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

var secret = []byte("test-secret")

// node is one presenced-like node on loopback: actors, the WebSocket
// endpoint on a free port, memory stores. Real time, fast preset.
type node struct {
	t        testing.TB
	n        *actors.Node
	srv      *Server
	policies *store.MemoryPolicies
	history  *store.MemoryHistory
	timing   config.Timing
}

type nodeOpt func(*Options, *actors.Deps)

func startNode(t testing.TB, opts ...nodeOpt) *node {
	t.Helper()
	nd := &node{t: t, policies: store.NewMemoryPolicies(), history: store.NewMemoryHistory(), timing: config.Fast()}
	deps := actors.Deps{NodeID: "n1", Timing: nd.timing, Seed: 1, Policies: nd.policies, History: nd.history}
	o := Options{Listen: "127.0.0.1:0", CloseGrace: 200 * time.Millisecond, Gateway: config.Gateway{WriteTimeout: 2 * time.Second}}
	for _, f := range opts {
		f(&o, &deps)
	}
	n, err := actors.Start(deps)
	if err != nil {
		t.Fatal(err)
	}
	nd.n = n
	nd.srv = New(o, n.Gateway(), nd.timing, secret, nil)
	if err := nd.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nd.srv.Stop()
		n.Stop()
		time.Sleep(1100 * time.Millisecond) // proto.actor's dead-letter throttle goroutine
	})
	return nd
}

func (nd *node) url() string { return "ws://" + nd.srv.Addr() + "/ws" }

func (nd *node) token(user, device string) string {
	tok, err := Tokens{Key: secret}.Mint(user, device, time.Hour)
	if err != nil {
		nd.t.Fatal(err)
	}
	return tok
}

func (nd *node) policy(user string, contacts ...string) {
	if err := nd.policies.Put(context.Background(), user, store.PolicyDoc{Granularity: core.Exact, Contacts: contacts}); err != nil {
		nd.t.Fatal(err)
	}
	nd.n.PolicyChanged(user)
}

func (nd *node) dial(user, device string, attempt uint64, sub ...string) *client.Conn {
	nd.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	proto := client.ProtoJSON
	if len(sub) > 0 {
		proto = sub[0]
	}
	c, err := client.Dial(ctx, nd.url(), client.DialOptions{Token: nd.token(user, device), Attempt: attempt, Subprotocol: proto})
	if err != nil {
		nd.t.Fatalf("dial %s/%s attempt %d: %v", user, device, attempt, err)
	}
	nd.t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// route is the user's devices as /api/route would answer.
func (nd *node) route(user string) []*messages.DeviceState {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := nd.n.Query(ctx, user)
	if err != nil {
		nd.t.Fatal(err)
	}
	return st.GetDevices()
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, within, 10*time.Millisecond, what, cond)
}

// next reads frames until one satisfies want, or fails after within.
func next(t *testing.T, c *client.Conn, within time.Duration, want func(*messages.Frame) bool) *messages.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		f, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		if want(f) {
			return f
		}
	}
}

// closeCode reads until the connection closes and returns the code.
func closeCode(t *testing.T, c *client.Conn, within time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		if _, err := c.Next(ctx); err != nil {
			return client.CloseCode(err)
		}
	}
}

func upgradeRequest(url string) *http.Request {
	req, _ := http.NewRequest("GET", strings.Replace(url, "ws://", "http://", 1), nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Version", "13")
	return req
}

// keepAlive heartbeats c until ctx ends.
func (nd *node) keepAlive(ctx context.Context, c *client.Conn) {
	go func() {
		for seq := uint64(1); ctx.Err() == nil; seq++ {
			if c.Heartbeat(ctx, seq) != nil {
				return
			}
			time.Sleep(nd.timing.Heartbeat / 2)
		}
	}()
}

// A device address another process holds is an error from Start, not a
// hang (nbio's engine, failing to bind, waits for ever), and nothing of
// the server is left running.
func TestStartOnATakenAddressFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	n, err := actors.Start(actors.Deps{NodeID: "n1", Timing: config.Fast(), Seed: 1, Policies: store.NewMemoryPolicies(), History: store.NewMemoryHistory()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { n.Stop(); time.Sleep(1100 * time.Millisecond) }()
	srv := New(Options{Listen: ln.Addr().String()}, n.Gateway(), config.Fast(), secret, nil)
	done := make(chan error, 1)
	go func() { done <- srv.Start() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("Start on a taken address: %v, want address already in use", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start on a taken address still running after 10 s")
	}
	srv.Stop()
}
