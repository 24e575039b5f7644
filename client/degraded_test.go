package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/encoding/protojson"
)

// wireNode accepts connections and runs script on each after hello:
// a node whose every frame the test writes, and whose every frame from
// the client the test reads.
func wireNode(t *testing.T, script func(ctx context.Context, n *wire)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{client.ProtoJSON}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		n := &wire{t: t, c: c}
		if n.send(r.Context(), &messages.Frame{Kind: &messages.Frame_Hello{Hello: &messages.Hello{ConnId: "c1", HeartbeatIntervalMs: 60000}}}) {
			script(r.Context(), n)
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
}

// wire is the node's side of one scripted connection.
type wire struct {
	t *testing.T
	c *websocket.Conn
}

func (n *wire) send(ctx context.Context, f *messages.Frame) bool {
	b, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(f)
	return n.c.Write(ctx, websocket.MessageText, b) == nil
}

// next reads the client's next frame, with when it came (nil: the
// connection ended).
func (n *wire) next(ctx context.Context) (*messages.Frame, time.Time) {
	_, b, err := n.c.Read(ctx)
	if err != nil {
		return nil, time.Time{}
	}
	f := &messages.Frame{}
	if err := protojson.Unmarshal(b, f); err != nil {
		n.t.Errorf("client frame %s: %v", b, err)
		return nil, time.Time{}
	}
	return f, time.Now()
}

// nextQuery skips to the client's next query.
func (n *wire) nextQuery(ctx context.Context) (*messages.Query, time.Time) {
	for {
		f, at := n.next(ctx)
		if f == nil || f.GetQuery() != nil {
			return f.GetQuery(), at
		}
	}
}

func pres(user string, st messages.Status, v uint64) *messages.Presence {
	return &messages.Presence{User: user, Status: st, Version: v}
}

// pullLog is what the scripted node saw and when, for the test's checks.
type pullLog struct {
	degradedAt, refusedAt time.Time
	queries               []time.Time
	targets               [][]string
	afterRestored         chan int // queries seen in the 600 ms after the restore's snapshot
}

// The Go SDK in degraded mode, against a scripted node: after degraded
// {retry_after_ms 100, alice carol} it queries both every 100 ms and no
// sooner; a 429 with retry_after_ms 400 makes it wait that long; each
// answer is taken as changes (alice online, version 2); restored stops
// the pulls, and the snapshot "restored" replaces the degraded targets'
// state (alice at version 3, carol absent: forgotten), after which an
// older batched change (alice version 2) is dropped.
func TestSessionPullsWhileDegraded(t *testing.T) {
	log := pullLog{afterRestored: make(chan int, 1)}
	var once atomic.Bool // a reconnect after the script's end only reads
	url := wireNode(t, func(ctx context.Context, n *wire) {
		if !once.CompareAndSwap(false, true) {
			for f, _ := n.next(ctx); f != nil; f, _ = n.next(ctx) {
			}
			return
		}
		degradedScript(ctx, n, &log)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := client.Start(ctx, client.Config{URLs: []string{url}, Token: "t"})
	go func() {
		for range s.Events() {
		}
	}()
	s.SubscribeTier(messages.Tier_batched, "alice", "carol")
	var pulled int
	select {
	case pulled = <-log.afterRestored:
	case <-time.After(15 * time.Second):
		t.Fatal("the script did not reach the restore")
	}
	if pulled != 0 {
		t.Errorf("%d queries after restored, want none", pulled)
	}
	if len(log.queries) < 4 {
		t.Fatalf("%d queries, want at least 4", len(log.queries))
	}
	if first := log.queries[0].Sub(log.degradedAt); first < 90*time.Millisecond {
		t.Errorf("first query %v after degraded, want at least retry_after_ms (100 ms)", first)
	}
	if wait := log.queries[1].Sub(log.refusedAt); wait < 390*time.Millisecond {
		t.Errorf("query %v after a 429 of 400 ms, want at least 400 ms", wait)
	}
	for i := 2; i < len(log.queries); i++ {
		if gap := log.queries[i].Sub(log.queries[i-1]); gap < 90*time.Millisecond {
			t.Errorf("queries %d and %d %v apart, want at least the pace (100 ms)", i-1, i, gap)
		}
	}
	for i, ts := range log.targets {
		if !slices.Equal(ts, []string{"alice", "carol"}) {
			t.Errorf("query %d asked %v, want alice and carol", i, ts)
		}
	}
	time.Sleep(100 * time.Millisecond) // the older batched change, after the snapshot
	if p, ok := s.State("alice"); !ok || p.GetVersion() != 3 || p.GetStatus() != messages.Status_online {
		t.Errorf("alice = %v, want the restored snapshot's (online, version 3)", p)
	}
	if p, ok := s.State("carol"); ok {
		t.Errorf("carol = %v, absent from the restored snapshot: want forgotten", p)
	}
	if got := s.Pulling(); len(got) != 0 {
		t.Errorf("Pulling() = %v after restored", got)
	}
	cancel()
	<-s.Done()
}

// degradedScript is the node's side of TestSessionPullsWhileDegraded.
func degradedScript(ctx context.Context, n *wire, log *pullLog) {
	var sub *messages.Subscribe
	for sub == nil {
		f, _ := n.next(ctx)
		if f == nil {
			return
		}
		sub = f.GetSubscribe()
	}
	n.send(ctx, &messages.Frame{Kind: &messages.Frame_Snapshot{Snapshot: &messages.Snapshot{RequestId: sub.GetRequestId(),
		Presences: []*messages.Presence{pres("alice", messages.Status_offline, 1), pres("carol", messages.Status_offline, 1)}}}})
	log.degradedAt = time.Now()
	n.send(ctx, &messages.Frame{Kind: &messages.Frame_Degraded{Degraded: &messages.Degraded{RetryAfterMs: 100, Targets: []string{"alice", "carol"}}}})
	for i := range 4 {
		q, at := n.nextQuery(ctx)
		if q == nil {
			return
		}
		log.queries, log.targets = append(log.queries, at), append(log.targets, slices.Sorted(slices.Values(q.GetTargets())))
		if i == 0 {
			log.refusedAt = time.Now()
			n.send(ctx, &messages.Frame{Kind: &messages.Frame_Error{Error: &messages.Error{Code: 429, Message: "query: slow down", RequestId: q.GetRequestId(), RetryAfterMs: 400}}})
			continue
		}
		n.send(ctx, &messages.Frame{Kind: &messages.Frame_Snapshot{Snapshot: &messages.Snapshot{RequestId: q.GetRequestId(),
			Presences: []*messages.Presence{pres("alice", messages.Status_online, 2), pres("carol", messages.Status_offline, 1)}}}})
	}
	n.send(ctx, &messages.Frame{Kind: &messages.Frame_Restored{Restored: &messages.Restored{}}})
	n.send(ctx, &messages.Frame{Kind: &messages.Frame_Snapshot{Snapshot: &messages.Snapshot{RequestId: core.RestoredID,
		Presences: []*messages.Presence{pres("alice", messages.Status_online, 3)}}}})
	n.send(ctx, &messages.Frame{Kind: &messages.Frame_PresenceBatch{PresenceBatch: &messages.PresenceBatch{Presences: []*messages.Presence{pres("alice", messages.Status_offline, 2)}}}})
	rctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	defer cancel()
	pulled := 0
	for q, _ := n.nextQuery(rctx); q != nil; q, _ = n.nextQuery(rctx) {
		pulled++
	}
	log.afterRestored <- pulled
}

// A Query whose context ends as it is asked fails, and leaves the
// connection as it was: coder/websocket closes a socket whose write's
// context ends mid-write, so the frame is written whatever the caller's
// context does.
func TestQueryCancelledKeepsTheConnection(t *testing.T) {
	var conns atomic.Int32
	url := wireNode(t, func(ctx context.Context, n *wire) {
		conns.Add(1)
		for q := (*messages.Query)(nil); ; {
			if q, _ = n.nextQuery(ctx); q == nil {
				return
			}
			n.send(ctx, &messages.Frame{Kind: &messages.Frame_Snapshot{Snapshot: &messages.Snapshot{RequestId: q.GetRequestId()}}})
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := client.Start(ctx, client.Config{URLs: []string{url}, Token: "t"})
	waitFor(t, 5*time.Second, "connected", func() bool { return s.Connections() == 1 })
	for range 50 {
		qctx, qcancel := context.WithCancel(ctx)
		go qcancel()
		_, _ = s.Query(qctx, "alice")
	}
	if _, err := s.Query(ctx, "alice"); err != nil {
		t.Fatalf("a query after the cancelled ones: %v", err)
	}
	if c := conns.Load(); c != 1 || s.Connections() != 1 {
		t.Fatalf("%d connections seen by the node (%d by the session), want the first alone", c, s.Connections())
	}
	cancel()
	<-s.Done()
}
