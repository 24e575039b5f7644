package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/internal/poll"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

var secret = []byte("sdk-test")

type node struct {
	n        *actors.Node
	srv      *gateway.Server
	policies *store.MemoryPolicies
}

func startNode(t *testing.T, id string, opts gateway.Options) *node {
	t.Helper()
	nd := &node{policies: store.NewMemoryPolicies()}
	n, err := actors.Start(actors.Deps{NodeID: id, Timing: config.Fast(), Seed: 1, Policies: nd.policies, History: store.NewMemoryHistory()})
	if err != nil {
		t.Fatal(err)
	}
	opts.Listen = "127.0.0.1:0"
	nd.n, nd.srv = n, gateway.New(opts, n.Gateway(), config.Fast(), secret, nil)
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

func token(t *testing.T, user, device string) string {
	tok, err := gateway.Tokens{Key: secret}.Mint(user, device, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, within, 10*time.Millisecond, what, cond)
}

// expectEnded fails unless s ends within the time given, with want and
// after its first connection (it did not retry).
func expectEnded(t *testing.T, s *client.Session, within time.Duration, want error) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(within):
		t.Fatalf("session still running after %v, want it ended with %v", within, want)
	}
	if !errors.Is(s.Err(), want) || s.Connections() != 1 {
		t.Fatalf("err %v after %d connections, want %v after 1", s.Err(), s.Connections(), want)
	}
}

// A session heartbeats on hello's interval (jittered down) and stays on
// one connection well past the stale threshold.
func TestSessionStaysConnected(t *testing.T) {
	nd := startNode(t, "n1", gateway.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	s := client.Start(ctx, client.Config{URLs: []string{nd.url()}, Token: token(t, "alice", "phone")})
	defer func() { cancel(); <-s.Done() }()
	waitFor(t, 2*time.Second, "connected", func() bool { return s.Hello() != nil })
	time.Sleep(4 * config.Fast().Stale)
	if n := s.Connections(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

// 1001 (draining) moves the session to the next node at once (Gap); it
// keeps its subscriptions.
func TestSessionMovesOnGoingAway(t *testing.T) {
	a, b := startNode(t, "a", gateway.Options{}), startNode(t, "b", gateway.Options{})
	for _, nd := range []*node{a, b} {
		_ = nd.policies.Put(context.Background(), "dave", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"alice"}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := client.Start(ctx, client.Config{URLs: []string{a.url(), b.url()}, Token: token(t, "alice", "phone")})
	defer func() { cancel(); <-s.Done() }()
	s.Subscribe("dave")
	waitFor(t, 2*time.Second, "on a", func() bool { return s.Hello().GetNode() == "a" })
	if g := s.Gap(); g != 0 {
		t.Fatalf("gap %v before any reconnect, want 0", g)
	}
	a.srv.Drain(nil)
	waitFor(t, 3*time.Second, "moved to b", func() bool { return s.Hello().GetNode() == "b" })
	// At once: the gap is a dial and a handshake, well inside a debounce.
	if g := s.Gap(); g <= 0 || g >= time.Second {
		t.Fatalf("gap %v from a's close to b's hello, want (0, 1 s)", g)
	}
	ev := <-s.Events()
	for ev.Presence.GetUser() != "dave" || !ev.Snapshot {
		ev = <-s.Events()
	}
	// On b, dave comes online: the resubscribed session hears it.
	d := client.Start(ctx, client.Config{URLs: []string{b.url()}, Token: token(t, "dave", "laptop")})
	defer func() { cancel(); <-d.Done() }()
	for ev = range s.Events() {
		if ev.Presence.GetStatus() == messages.Status_online {
			break
		}
	}
}

// A 503 (the node drains) moves the session to the next node at once: its
// Retry-After (1 s) is that node's. Only once every node refused does the
// session wait it out.
func TestSessionTriesTheNextNodeOnRefusal(t *testing.T) {
	a, b := startNode(t, "a", gateway.Options{}), startNode(t, "b", gateway.Options{})
	a.srv.Refuse()
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	s := client.Start(ctx, client.Config{URLs: []string{a.url(), b.url()}, Token: token(t, "alice", "phone")})
	defer func() { cancel(); <-s.Done() }()
	waitFor(t, 2*time.Second, "on b", func() bool { return s.Hello().GetNode() == "b" })
	if d := time.Since(start); d >= time.Second {
		t.Fatalf("on b after %v: the session waited out a's Retry-After", d)
	}
	// Both refuse: the session tries each once, then waits a second.
	var mu sync.Mutex
	var tries []time.Time
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		tries = append(tries, time.Now())
		mu.Unlock()
		w.Header().Set("Retry-After", "1")
		http.Error(w, "draining", http.StatusServiceUnavailable)
	}))
	defer refusing.Close()
	all := client.Start(ctx, client.Config{URLs: []string{"ws" + strings.TrimPrefix(refusing.URL, "http") + "/ws", a.url()}, Token: token(t, "bob", "phone")})
	defer func() { cancel(); <-all.Done() }()
	waitFor(t, 5*time.Second, "a second try", func() bool { mu.Lock(); defer mu.Unlock(); return len(tries) >= 2 })
	mu.Lock()
	gap := tries[1].Sub(tries[0])
	mu.Unlock()
	if gap < time.Second {
		t.Fatalf("tried again %v after both nodes refused, want Retry-After (1 s) waited out", gap)
	}
}

// 4001: a newer connection of the device took over; the session ends with
// ErrSuperseded and does not come back.
func TestSessionStopsWhenSuperseded(t *testing.T) {
	nd := startNode(t, "n1", gateway.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := client.Start(ctx, client.Config{URLs: []string{nd.url()}, Token: token(t, "alice", "phone")})
	waitFor(t, 2*time.Second, "connected", func() bool { return s.Hello() != nil })
	c, err := client.Dial(ctx, nd.url(), client.DialOptions{Token: token(t, "alice", "phone"), Attempt: uint64(time.Now().UnixMilli()) + 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	expectEnded(t, s, 3*time.Second, client.ErrSuperseded)
}

// A consumer that stops reading events stalls the session's one reader on
// the full Events channel (256), so its socket backs up and the server cuts
// the connection with 4008. The session sees that close only when the
// consumer reads again: then it reads what the kernel held and the close
// frame, reconnects, resubscribes, and holds the newest state, set after
// the cut, which only the new subscription can bring.
func TestSessionRecoversFromOverflow(t *testing.T) {
	reg := prometheus.NewRegistry()
	// CloseGrace: the close frame waits behind what the stalled socket did
	// not take; the consumer reads again well inside the grace (margin for a
	// loaded machine), so the session sees 4008, not a cut without a close
	// frame.
	nd := startNode(t, "n1", gateway.Options{Gateway: config.Gateway{Outbox: 8, SendBuffer: 4096}, CloseGrace: 3 * time.Second, Registerer: reg})
	_ = nd.policies.Put(context.Background(), "dave", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"alice"}})
	ctx, cancel := context.WithCancel(context.Background())
	small := smallReceiver()
	defer small.CloseIdleConnections()
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := client.Start(ctx, client.Config{URLs: []string{nd.url()}, Token: token(t, "alice", "phone"), HTTPClient: &http.Client{Transport: small}, Log: log})
	defer func() { cancel(); <-s.Done() }()
	s.Subscribe("dave")
	d := client.Start(ctx, client.Config{URLs: []string{nd.url()}, Token: token(t, "dave", "laptop")})
	defer func() { cancel(); <-d.Done() }()
	waitFor(t, 2*time.Second, "dave connected", func() bool { return d.Hello() != nil })
	shows := []messages.Show{messages.Show_away, messages.Show_dnd}
	flips := 0
	for ; flips%20 != 0 || serverCloses(t, reg, messages.CloseOverflow) == 0; flips++ { // nobody reads s.Events()
		if flips == 50000 {
			t.Fatalf("no 4008 after %d status changes (%d events waiting, %d connections)", flips, len(s.Events()), s.Connections())
		}
		d.SetStatus(shows[flips%2])
		if flips%10 == 9 {
			time.Sleep(time.Millisecond) // a rate a reading subscriber keeps up with
		}
	}
	t.Logf("alice cut with 4008 after %d flips, %d events waiting", flips, len(s.Events()))
	// After the cut: only a new subscription hears it.
	d.SetStatus(messages.Show_available)
	go func() { // the consumer reads again
		for range s.Events() {
		}
	}()
	waitFor(t, 5*time.Second, "reconnected with the newest state", func() bool {
		p, ok := s.State("dave")
		return s.Connections() >= 2 && ok && p.GetShow() == messages.Show_available
	})
	if !strings.Contains(logs.String(), "code=4008") {
		t.Fatalf("the session did not see 4008; its log:\n%s", logs.String())
	}
}

// smallReceiver dials sockets with a small receive buffer (4 KiB asked,
// 8 KiB applied by Linux), so that the frames a consumer does not take back
// up to the server within a few hundred events (with the kernel's
// autotuning on loopback it took from hundreds to hundreds of thousands).
func smallReceiver() *http.Transport {
	return &http.Transport{DialContext: (&net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); cerr != nil {
			return cerr
		}
		return err
	}}).DialContext}
}

// serverCloses is how many connections the node closed with code, from its
// presence_ws_server_closes_total.
func serverCloses(t *testing.T, reg *prometheus.Registry, code messages.CloseCode) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetName() == "presence_ws_server_closes_total" && m.GetLabel()[0].GetValue() == strconv.Itoa(int(code)) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// lockedBuffer is a log destination for a session's goroutines and the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// 4401: the token expired during the connection. With Refresh the session
// reconnects at once with a new token; without, it ends with
// ErrTokenExpired instead of retrying a token that can only get 401.
func TestSessionTokenExpiry(t *testing.T) {
	nd := startNode(t, "n1", gateway.Options{})
	short := func() string {
		tok, err := gateway.Tokens{Key: secret}.Mint("alice", "phone", 2*time.Second) // whole seconds: 1 to 2 s
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plain := client.Start(ctx, client.Config{URLs: []string{nd.url()}, Token: short()})
	expectEnded(t, plain, 5*time.Second, client.ErrTokenExpired)
	refreshed := client.Start(ctx, client.Config{URLs: []string{nd.url()}, Token: short(), Refresh: func(context.Context) (string, error) {
		return token(t, "alice", "phone"), nil
	}})
	waitFor(t, 5*time.Second, "reconnected with a fresh token", func() bool { return refreshed.Connections() == 2 })
	select {
	case <-refreshed.Done():
		t.Fatalf("session with Refresh ended: %v", refreshed.Err())
	default:
	}
}
