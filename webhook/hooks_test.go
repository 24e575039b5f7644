package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var secret = []byte("a-secret-of-32-bytes-for-tests!!")

// receiver is a test endpoint, called in process (its RoundTrip): it
// checks every signature and records every request and the events of
// those it takes; answer decides each request's status and headers (nil:
// 200); a request waits for hold to close first (nil: none) or gives up
// with its context.
type receiver struct {
	mu     sync.Mutex
	events []Event
	bodies [][]byte    // of every request taken
	ids    []string    // of every request
	times  []time.Time // of every request
	bad    int
	answer func(n int) (int, http.Header)
	hold   chan struct{}
	n      int
}

func (rc *receiver) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	hold := rc.hold
	rc.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	rec := httptest.NewRecorder()
	rc.serve(rec, r, body)
	return rec.Result(), nil
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request, body []byte) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.n++
	rc.ids = append(rc.ids, r.Header.Get(DeliveryHeader))
	rc.times = append(rc.times, time.Now())
	if err := client.VerifyWebhook(secret, r.Header.Get(SignatureHeader), body, time.Now(), time.Minute); err != nil {
		rc.bad++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if rc.answer != nil {
		if code, hdr := rc.answer(rc.n); code != 200 {
			for k, v := range hdr {
				w.Header()[k] = v
			}
			w.WriteHeader(code)
			return
		}
	}
	var b struct{ Events []Event }
	_ = json.Unmarshal(body, &b)
	rc.events = append(rc.events, b.Events...)
	rc.bodies = append(rc.bodies, body)
}

func (rc *receiver) got() []Event {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.events)
}

// latest is each user's highest version received.
func (rc *receiver) latest() map[string]uint64 {
	out := map[string]uint64{}
	for _, ev := range rc.got() {
		out[ev.User] = max(out[ev.User], ev.Version)
	}
	return out
}

// versions are each user's versions in the order received.
func (rc *receiver) versions() map[string][]uint64 {
	out := map[string][]uint64{}
	for _, ev := range rc.got() {
		out[ev.User] = append(out[ev.User], ev.Version)
	}
	return out
}

func (rc *receiver) set(answer func(n int) (int, http.Header)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answer = answer
}

// status answers code to every request (0: 200).
func status(code int) func(int) (int, http.Header) {
	return func(int) (int, http.Header) { return max(code, 200), nil }
}

func fastLimits() Limits {
	return Limits{FlushEvery: 5 * time.Millisecond, MaxBatch: 10, Workers: 2, Timeout: time.Second, BackoffMin: 5 * time.Millisecond,
		BackoffMax: 40 * time.Millisecond, Poll: 20 * time.Millisecond, Sweep: 20 * time.Millisecond, MaxPending: 50, MaxBacklog: 100}
}

// truth is what the views say of users (Config.Query); a user it does
// not name is offline with no device at version 0. A query with a floor
// raises the version to it and the wall time in ms, as a view does.
type truth struct {
	mu sync.Mutex
	m  map[string]*messages.ViewState
}

func (tr *truth) query(_ context.Context, user string, floor uint64) (*messages.ViewState, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.m == nil {
		tr.m = map[string]*messages.ViewState{}
	}
	st, ok := tr.m[user]
	if !ok {
		st = &messages.ViewState{User: user}
		tr.m[user] = st
	}
	if floor > 0 {
		st.Version = max(st.Version, floor, uint64(time.Now().UnixMilli()))
	}
	return st, nil
}

// set makes st the user's view's state.
func (tr *truth) set(st *messages.ViewState) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.m == nil {
		tr.m = map[string]*messages.ViewState{}
	}
	tr.m[st.GetUser()] = st
}

// publish is the user's view publishing a change now, as core.View does:
// at a version above its last and at least the wall time in ms.
func (tr *truth) publish(user string, online bool) Event {
	st, _ := tr.query(context.Background(), user, 0)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	st.Version = max(st.Version+1, uint64(time.Now().UnixMilli()))
	st.Online = online
	ev := Event{User: user, Status: "offline", Version: st.Version, AtMs: time.Now().UnixMilli(), Devices: []Device{}}
	if online {
		ev.Status = "online"
	}
	return ev
}

// node is the webhooks of node n1 under test, with its receiver, store,
// views and log.
type node struct {
	*Hooks
	rc  *receiver
	st  *store.MemoryHooks
	tr  *truth
	log *bytes.Buffer
}

// options change a test node's configuration before it starts.
type option func(*Config)

func withLimits(f func(*Limits)) option { return func(c *Config) { f(&c.Limits) } }
func owning(owns func(string) bool) option {
	return func(c *Config) { c.Owns = owns }
}
func aliveAre(ids ...string) option {
	return func(c *Config) { c.Alive = func() []string { return ids } }
}

// start starts n1's webhooks on one endpoint, inside the test's bubble;
// they stop at its end.
func start(t *testing.T, rc *receiver, st *store.MemoryHooks, opts ...option) *node {
	t.Helper()
	n := &node{rc: rc, st: st, tr: &truth{}, log: &bytes.Buffer{}}
	cfg := Config{Endpoints: []Endpoint{{URL: "http://hooks.example/hook?token=x", Secret: secret}}, Node: "n1", Store: st,
		Owns: all, Alive: func() []string { return []string{"n1"} }, Query: n.tr.query, Limits: fastLimits(),
		Client: &http.Client{Transport: rc}, Rand: rand.New(rand.NewPCG(1, 2)), Log: slog.New(slog.NewTextHandler(&lockedBuffer{b: n.log}, nil))}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	n.Hooks = h
	return n
}

// lockedBuffer is a log destination written by several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (n *node) logged() string {
	synctest.Wait()
	return n.log.String()
}

func (n *node) label() string { return n.eps[0].label }
func (n *node) key() string   { return n.eps[0].key }

func (n *node) rows(t *testing.T) int {
	t.Helper()
	c, err := n.st.CountHooks(context.Background(), n.key(), "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func all(string) bool { return true }

// settle lets the webhooks run for d of fake time, then until every
// goroutine waits.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func ev(user string, v uint64, status string) Event {
	return Event{User: user, Status: status, Version: v, AtMs: time.Now().UnixMilli(), Devices: []Device{}}
}

// inOrder fails unless every user's versions arrived in order (a
// duplicate of the same version may follow it).
func inOrder(t *testing.T, vs map[string][]uint64) {
	t.Helper()
	for u, v := range vs {
		if !slices.IsSorted(v) {
			t.Errorf("%s's versions arrived out of order: %v", u, v)
		}
	}
}

// Changes reach the receiver signed, every version in order, even two of
// a user before a flush; an offline user's row is gone once delivered, an
// online user's stays as what the receiver knows.
func TestDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		n := start(t, rc, store.NewMemoryHooks())
		n.Changed(ev("alice", 1, "online"))
		n.Changed(ev("alice", 2, "offline"))
		n.Changed(ev("alice", 1, "online")) // older: told already
		n.Changed(ev("bob", 7, "online"))
		settle(time.Second)
		if vs := rc.versions(); !slices.Equal(vs["alice"], []uint64{1, 2}) || !slices.Equal(vs["bob"], []uint64{7}) {
			t.Fatalf("received %v, want alice 1 then 2, bob 7", vs)
		}
		if n.rows(t) != 0 {
			t.Fatalf("%d rows waiting after delivery", n.rows(t))
		}
		if rows, _ := n.st.OwnedHooks(t.Context(), n.key(), "n1", "", 10); len(rows) != 1 || rows[0].User != "bob" || !rows[0].Delivered {
			t.Fatalf("rows kept %+v, want bob's online, delivered", rows)
		}
		if rc.bad != 0 || rc.ids[0] == "" {
			t.Fatalf("bad signatures %d, delivery ids %v", rc.bad, rc.ids)
		}
		if d, q := testutil.ToFloat64(n.m.delivered.WithLabelValues(n.label())), testutil.ToFloat64(n.m.queued.WithLabelValues(n.label())); d != 3 || q != 3 {
			t.Fatalf("delivered %v, queued %v: want 3 each", d, q)
		}
		if l := n.label(); l != "hooks.example/hook" {
			t.Fatalf("label %q: want host and path without the query", l)
		}
	})
}

// A healthy receiver, with a 500 now and then, gets every version of
// every user at least once and in order per user; nothing is coalesced,
// and memory is empty at the end.
func TestEveryVersionDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{answer: func(n int) (int, http.Header) {
			if n%7 == 3 {
				return 500, nil
			}
			return 200, nil
		}}
		n := start(t, rc, store.NewMemoryHooks())
		rnd := rand.New(rand.NewPCG(3, 4))
		sent := map[string][]uint64{}
		for i := range 400 {
			u := fmt.Sprintf("u%d", rnd.IntN(12))
			v := uint64(i + 1)
			n.Changed(ev(u, v, []string{"online", "offline"}[rnd.IntN(2)]))
			sent[u] = append(sent[u], v)
			if rnd.IntN(4) == 0 {
				time.Sleep(time.Duration(rnd.IntN(3)) * time.Millisecond)
			}
		}
		settle(5 * time.Second)
		got := rc.versions()
		inOrder(t, got)
		for u, vs := range sent {
			for _, v := range vs {
				if !slices.Contains(got[u], v) {
					t.Fatalf("%s's version %d never arrived (got %v)", u, v, got[u])
				}
			}
		}
		if c := testutil.ToFloat64(n.m.coalesced.WithLabelValues(n.label())); c != 0 {
			t.Fatalf("coalesced %v under the bound", c)
		}
		if b := n.eps[0].backlogLen(); b != 0 || n.pendingLen() != 0 || n.rows(t) != 0 {
			t.Fatalf("backlog %d, pending %d, rows %d at the end", b, n.pendingLen(), n.rows(t))
		}
	})
}

// A receiver down while changes keep coming: the backlog never holds more
// than MaxBacklog, a user's waiting changes are coalesced (counted), the
// store holds a row per user; once the receiver is back every user's
// latest version arrives, each user's versions in order.
func TestBacklogOverBoundCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{answer: status(503)}
		n := start(t, rc, store.NewMemoryHooks(), withLimits(func(l *Limits) { l.MaxPending = 1000 }))
		const users = 150 // more than MaxBacklog: some are left to their rows alone
		last := map[string]uint64{}
		v := uint64(0)
		most := 0
		for round := range 20 {
			for i := range users {
				if (i+round)%3 == 0 {
					continue
				}
				u := fmt.Sprintf("u%03d", i)
				v++
				n.Changed(ev(u, v, "online"))
				last[u] = v
			}
			settle(10 * time.Millisecond)
			most = max(most, n.eps[0].backlogLen())
		}
		settle(time.Second)
		if most > n.cfg.Limits.MaxBacklog {
			t.Fatalf("the backlog held %d changes, over MaxBacklog %d", most, n.cfg.Limits.MaxBacklog)
		}
		if r := n.rows(t); r != len(last) {
			t.Fatalf("%d rows in the store for %d users", r, len(last))
		}
		c := testutil.ToFloat64(n.m.coalesced.WithLabelValues(n.label()))
		if c == 0 || testutil.ToFloat64(n.m.dropped) != 0 {
			t.Fatalf("coalesced %v, dropped %v: want some coalesced over the bound, none dropped", c, testutil.ToFloat64(n.m.dropped))
		}
		rc.set(nil)
		settle(10 * time.Second)
		got := rc.latest()
		for u, want := range last {
			if got[u] != want {
				t.Fatalf("%s: latest received %d, want %d", u, got[u], want)
			}
		}
		inOrder(t, rc.versions())
		if n.eps[0].backlogLen() != 0 || n.rows(t) != 0 {
			t.Fatalf("backlog %d, rows %d at the end", n.eps[0].backlogLen(), n.rows(t))
		}
		t.Logf("%d changes, %v coalesced, %d events received", v, c, len(rc.got()))
	})
}

// A receiver that never answers holds up no caller: Changed returns while
// every POST hangs (a block would deadlock the bubble), memory stays
// within MaxBacklog and the store at a row per user.
func TestSlowReceiverBlocksNobody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{hold: make(chan struct{})}
		n := start(t, rc, store.NewMemoryHooks())
		defer close(rc.hold)
		v := uint64(0)
		for range 20 {
			for u := range 30 {
				v++
				n.Changed(ev(fmt.Sprintf("u%02d", u), v, "online"))
			}
			settle(10 * time.Millisecond)
			if b := n.eps[0].backlogLen(); b > n.cfg.Limits.MaxBacklog {
				t.Fatalf("backlog %d over %d", b, n.cfg.Limits.MaxBacklog)
			}
		}
		if n.pendingLen() != 0 {
			t.Fatalf("%d changes not written", n.pendingLen())
		}
		if r := n.rows(t); r != 30 {
			t.Fatalf("rows %d, want one per user (30)", r)
		}
	})
}

// The store down: changes wait in memory (at most MaxPending users: a
// change of one more is dropped and counted) and are all delivered once
// it is back.
func TestStoreDownKeepsChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		st := store.NewMemoryHooks()
		st.Fail(errors.New("disk full"))
		// No flush until every change is in (a batch would kick one mid-loop,
		// whose failed write and requeue race the changes after it): the
		// counts below are then exact.
		n := start(t, rc, st, withLimits(func(l *Limits) { l.MaxBatch = 1000 }))
		for i := range 60 {
			n.Changed(ev(fmt.Sprintf("u%02d", i), 1, "online"))
			n.Changed(ev(fmt.Sprintf("u%02d", i), 2, "offline"))
		}
		settle(100 * time.Millisecond)
		if testutil.ToFloat64(n.m.storeErrors) == 0 {
			t.Fatal("no store error counted")
		}
		if p, d := n.pendingLen(), testutil.ToFloat64(n.m.dropped); p != 100 || d != 20 {
			t.Fatalf("pending %d, dropped %v: want 100 (50 users) and 20 (10 users over MaxPending)", p, d)
		}
		if len(rc.got()) != 0 {
			t.Fatal("delivered before the store had it")
		}
		st.Fail(nil)
		settle(2 * time.Second)
		vs := rc.versions()
		if len(vs) != 50 {
			t.Fatalf("%d users delivered, want 50", len(vs))
		}
		for u, v := range vs {
			if !slices.Equal(v, []uint64{1, 2}) {
				t.Fatalf("%s: received %v, want 1 then 2", u, v)
			}
		}
	})
}

// A 4xx other than 429 is not retried: counted failed, the rows dropped,
// logged once per burst with the count since.
func TestRefusedIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{answer: status(400)}
		n := start(t, rc, store.NewMemoryHooks())
		for i := range 5 {
			n.Changed(ev("alice", uint64(i+1), "online"))
			settle(time.Second) // each its own batch
		}
		if f := testutil.ToFloat64(n.m.failed.WithLabelValues(n.label())); f != 5 || rc.n != 5 {
			t.Fatalf("failed %v, requests %d: want 5 each, one try a batch", f, rc.n)
		}
		if n.rows(t) != 0 {
			t.Fatalf("%d rows left", n.rows(t))
		}
		if s := n.States(t.Context()); s[0].State != "failing" || s[0].LastError == "" {
			t.Fatalf("state %+v", s)
		}
		if got := strings.Count(n.logged(), "refused a batch"); got != 1 {
			t.Fatalf("logged %d times in a burst of 5 within a minute, want once:\n%s", got, n.logged())
		}
		time.Sleep(time.Minute)
		n.Changed(ev("alice", 9, "online"))
		settle(time.Second)
		if lines := strings.Split(strings.TrimSpace(n.logged()), "\n"); len(lines) != 2 || !strings.Contains(lines[1], "times=5") {
			t.Fatalf("after a minute: want a second line counting the 5 since the first:\n%s", n.logged())
		}
	})
}

// The store down while one user's changes keep coming: at most MaxBacklog
// wait in memory, the rest coalesced into her latest (counted); once the
// store is back her latest reaches the receiver, her versions in order.
func TestStoreDownCoalescesOverBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		st := store.NewMemoryHooks()
		st.Fail(errors.New("disk full"))
		n := start(t, rc, st)
		most := 0
		for v := range uint64(1000) {
			n.Changed(ev("alice", v+1, "online"))
			most = max(most, n.pendingLen())
			if v%50 == 0 {
				settle(10 * time.Millisecond)
			}
		}
		if most > n.cfg.Limits.MaxBacklog {
			t.Fatalf("%d changes waited for the store, over MaxBacklog %d", most, n.cfg.Limits.MaxBacklog)
		}
		if c := testutil.ToFloat64(n.m.coalesced.WithLabelValues(n.label())); c == 0 {
			t.Fatal("nothing counted coalesced")
		}
		st.Fail(nil)
		settle(2 * time.Second)
		vs := rc.versions()["alice"]
		inOrder(t, rc.versions())
		if len(vs) == 0 || vs[len(vs)-1] != 1000 {
			t.Fatalf("alice's versions received end at %v, want 1000", vs[max(len(vs)-3, 0):])
		}
	})
}

// The body is the contract's: {"events":[...]} with each event's fields
// named as docs/webhooks.md and CONTRACT say, the full state of the user.
func TestPayloadFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		n := start(t, rc, store.NewMemoryHooks())
		at := time.Now().UnixMilli()
		n.Changed(Event{User: "bob", Status: "online", Version: 3, Show: "away", StatusText: "on the train", AtMs: at,
			Devices: []Device{{Device: "phone", Platform: "mobile", Activity: "background", Node: "n2"}}})
		n.Changed(Event{User: "bob", Status: "offline", Version: 4, Reason: "half_open", LatencyMs: 812, AtMs: at + 1, Devices: []Device{}})
		settle(time.Second)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if len(rc.bodies) != 1 {
			t.Fatalf("%d requests, want one batch", len(rc.bodies))
		}
		want := fmt.Sprintf(`{"events":[`+
			`{"user":"bob","status":"online","version":3,"show":"away","status_text":"on the train","devices":[{"device":"phone","platform":"mobile","activity":"background","node":"n2"}],"at_ms":%d},`+
			`{"user":"bob","status":"offline","version":4,"devices":[],"reason":"half_open","latency_ms":812,"at_ms":%d}]}`, at, at+1)
		if got := string(rc.bodies[0]); got != want {
			t.Fatalf("body\n %s\nwant\n %s", got, want)
		}
	})
}
