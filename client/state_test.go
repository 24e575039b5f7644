package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// fakeConn is one connection to a scripted fake node: its handshake's
// query, and its frames both ways.
type fakeConn struct {
	ctx   context.Context
	ws    *websocket.Conn
	query url.Values
}

func (f *fakeConn) send(fr *messages.Frame) error {
	b, err := protojson.Marshal(fr)
	if err != nil {
		return err
	}
	return f.ws.Write(f.ctx, websocket.MessageText, b)
}

// next reads the client's frames until one satisfies want.
func (f *fakeConn) next(want func(*messages.Frame) bool) (*messages.Frame, error) {
	for {
		_, b, err := f.ws.Read(f.ctx)
		if err != nil {
			return nil, err
		}
		fr := &messages.Frame{}
		if protojson.Unmarshal(b, fr) == nil && want(fr) {
			return fr, nil
		}
	}
}

// drain reads until the client closes the connection: a hijacked
// connection's request context does not end with it.
func (f *fakeConn) drain() { _, _ = f.next(func(*messages.Frame) bool { return false }) }

// scriptedNode is a fake node: it greets each connection with a hello
// (a minute's heartbeat, nothing lapsing) and hands it to serve with its
// number from 1; the connection ends when serve returns.
func scriptedNode(t *testing.T, serve func(n int, c *fakeConn)) string {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{client.ProtoJSON}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		c := &fakeConn{ctx: r.Context(), ws: ws, query: r.URL.Query()}
		if c.send(&messages.Frame{Kind: &messages.Frame_Hello{Hello: &messages.Hello{ConnId: "c1", HeartbeatIntervalMs: 60000}}}) != nil {
			return
		}
		serve(int(conns.Add(1)), c)
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
}

func isKind(kind string) func(*messages.Frame) bool {
	return func(f *messages.Frame) bool {
		k := f.ProtoReflect().WhichOneof(f.ProtoReflect().Descriptor().Oneofs().ByName("kind"))
		return k != nil && string(k.Name()) == kind
	}
}

// nextEvent is the session's next event, or fails after 5 s.
func nextEvent(t *testing.T, s *client.Session) client.Event {
	t.Helper()
	select {
	case ev := <-s.Events():
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5 s")
	}
	return client.Event{}
}

// Session.State holds what the node sent of a subscribed target: the
// derived show, the platforms with their activity, the idle minute and
// the status text, from the snapshot and then from each newer change.
func TestSessionStateHasTheDeviceState(t *testing.T) {
	snap := &messages.Presence{User: "alice", Status: messages.Status_online, Version: 10, Show: messages.Show_away, IdleSinceMinute: 29938575, StatusText: "on the train",
		Devices: []*messages.DevicePresence{{Platform: messages.Platform_mobile, Activity: messages.Activity_background}, {Platform: messages.Platform_desktop, Activity: messages.Activity_idle}}}
	change := &messages.Presence{User: "alice", Status: messages.Status_online, Version: 11, Show: messages.Show_available, StatusText: "back",
		Devices: []*messages.DevicePresence{{Platform: messages.Platform_desktop, Activity: messages.Activity_active}}}
	step, stop := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop) }) // a test that failed early
	u := scriptedNode(t, func(_ int, c *fakeConn) {
		sub, err := c.next(isKind("subscribe"))
		if err != nil {
			return
		}
		_ = c.send(&messages.Frame{Kind: &messages.Frame_Snapshot{Snapshot: &messages.Snapshot{RequestId: sub.GetSubscribe().GetRequestId(), Presences: []*messages.Presence{snap}}}})
		select {
		case <-step:
		case <-stop:
			return
		}
		_ = c.send(&messages.Frame{Kind: &messages.Frame_Presence{Presence: change}})
		c.drain()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := client.Start(ctx, client.Config{URLs: []string{u}, Token: "t"})
	s.Subscribe("alice")
	for i, want := range []*messages.Presence{snap, change} {
		if i == 1 {
			close(step)
		}
		if ev := nextEvent(t, s); !proto.Equal(ev.Presence, want) {
			t.Fatalf("event %v, want %v", ev.Presence, want)
		}
		p, ok := s.State("alice")
		if !ok || p.GetShow() != want.GetShow() || p.GetIdleSinceMinute() != want.GetIdleSinceMinute() || p.GetStatusText() != want.GetStatusText() ||
			!proto.Equal(&messages.Presence{Devices: p.GetDevices()}, &messages.Presence{Devices: want.GetDevices()}) {
			t.Fatalf("State(alice) = %v (%v), want %v", p, ok, want)
		}
	}
	cancel()
	<-s.Done()
}

// A set_activity the node refuses for its rate (429) is sent again, with
// the activity declared by then, once retry_after_ms has passed, not
// before.
func TestSessionRetriesRefusedActivityAfterItsWait(t *testing.T) {
	const retryAfter = 300 * time.Millisecond
	type retry struct {
		after    time.Duration
		activity messages.Activity
	}
	retried := make(chan retry, 1)
	u := scriptedNode(t, func(_ int, c *fakeConn) {
		if _, err := c.next(isKind("set_activity")); err != nil {
			return
		}
		refused := time.Now()
		_ = c.send(&messages.Frame{Kind: &messages.Frame_Error{Error: &messages.Error{Code: uint32(messages.ErrSlowDown), RetryAfterMs: uint32(retryAfter.Milliseconds()),
			Message: "set_activity: more than 1 a second (activity-rate, burst activity-burst 5): retry after 300 ms"}}})
		f, err := c.next(isKind("set_activity"))
		if err != nil {
			return
		}
		retried <- retry{time.Since(refused), f.GetSetActivity().GetActivity()}
		c.drain()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := client.Start(ctx, client.Config{URLs: []string{u}, Token: "t", Activity: messages.Activity_active})
	waitFor(t, 5*time.Second, "connected", func() bool { return s.Connections() == 1 })
	if err := s.SetActivity(messages.Activity_idle); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-retried:
		if r.after < retryAfter || r.after > retryAfter+2*time.Second || r.activity != messages.Activity_idle {
			t.Fatalf("retried %v after the refusal with %v; want idle after %v", r.after, r.activity, retryAfter)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the refused set_activity was not sent again")
	}
	cancel()
	<-s.Done()
}

// After a reconnect the session declares again what the device declared
// last (its handshake's ?activity=), with its platform: the node it
// reconnects to knows nothing of what it said on the old connection.
func TestSessionDeclaresActivityAgainAfterReconnect(t *testing.T) {
	queries := make(chan url.Values, 2)
	u := scriptedNode(t, func(n int, c *fakeConn) {
		queries <- c.query
		if n == 1 { // the first node goes away once the device declared background
			if _, err := c.next(isKind("set_activity")); err == nil {
				_ = c.ws.Close(websocket.StatusCode(messages.CloseGoingAway), "draining")
			}
			return
		}
		c.drain()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := client.Start(ctx, client.Config{URLs: []string{u}, Token: "t", Platform: messages.Platform_mobile, Activity: messages.Activity_active})
	first := <-queries
	if first.Get("activity") != "active" || first.Get("platform") != "mobile" {
		t.Fatalf("first handshake %v, want mobile, active", first)
	}
	waitFor(t, 5*time.Second, "connected", func() bool { return s.Connections() == 1 })
	if err := s.SetActivity(messages.Activity_background); err != nil {
		t.Fatal(err)
	}
	select {
	case q := <-queries:
		if q.Get("activity") != "background" || q.Get("platform") != "mobile" {
			t.Fatalf("handshake after the reconnect %v, want mobile, background", q)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reconnect")
	}
	cancel()
	<-s.Done()
}

// A snapshot of 1,000 targets with their status texts is far larger than
// the 64 KiB a device may send (messages.MaxMessage); the SDK reads it
// (with the device's own limit as its read limit: "message too big").
func TestConnReadsASnapshotLargerThanADeviceMay(t *testing.T) {
	snap := &messages.Snapshot{RequestId: "contacts"}
	for i := range 1000 {
		snap.Presences = append(snap.Presences, &messages.Presence{User: fmt.Sprintf("user-%04d", i), Status: messages.Status_online, Version: 1,
			Show: messages.Show_dnd, StatusText: strings.Repeat("é", 140), Devices: []*messages.DevicePresence{{Platform: messages.Platform_mobile}}})
	}
	u := scriptedNode(t, func(_ int, c *fakeConn) {
		if c.send(&messages.Frame{Kind: &messages.Frame_Snapshot{Snapshot: snap}}) == nil {
			c.drain()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, u, client.DialOptions{Token: "t", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	f, err := c.Next(ctx)
	if err != nil {
		t.Fatalf("reading a snapshot of %d presences: %v", len(snap.Presences), err)
	}
	if got := len(f.GetSnapshot().GetPresences()); got != 1000 {
		t.Fatalf("snapshot of %d presences, want 1000", got)
	}
}
