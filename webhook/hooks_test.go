package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/internal/poll"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var secret = []byte("a-secret-of-32-bytes-for-tests!!")

// receiver is a test endpoint: it checks every signature and records
// every event; answer decides the status of each request (nil: 200).
type receiver struct {
	mu      sync.Mutex
	events  []Event
	ids     []string
	bad     int
	answer  func(n int) int
	retryIn string // Retry-After on a 429 or 5xx
	n       int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.n++
	if err := client.VerifyWebhook(secret, r.Header.Get(SignatureHeader), body, time.Now(), time.Minute); err != nil {
		rc.bad++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if rc.answer != nil {
		if code := rc.answer(rc.n); code != 200 {
			if rc.retryIn != "" {
				w.Header().Set("Retry-After", rc.retryIn)
			}
			w.WriteHeader(code)
			return
		}
	}
	var b struct{ Events []Event }
	_ = json.Unmarshal(body, &b)
	rc.events = append(rc.events, b.Events...)
	rc.ids = append(rc.ids, r.Header.Get(DeliveryHeader))
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

func fastLimits() Limits {
	return Limits{FlushEvery: 5 * time.Millisecond, MaxBatch: 10, Workers: 2, Timeout: time.Second, BackoffMin: 5 * time.Millisecond,
		BackoffMax: 40 * time.Millisecond, Poll: 20 * time.Millisecond, Sweep: 20 * time.Millisecond, MaxPending: 50}
}

// truth is what the views say of users (Config.Query); a user it does
// not name is offline with no device.
type truth struct {
	mu sync.Mutex
	m  map[string]*messages.ViewState
}

func (tr *truth) query(_ context.Context, user string) (*messages.ViewState, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if st, ok := tr.m[user]; ok {
		return st, nil
	}
	return &messages.ViewState{User: user}, nil
}

func start(t *testing.T, rc http.Handler, st store.HookStore, owns func(string) bool, alive []string) *Hooks {
	t.Helper()
	return startWith(t, rc, st, owns, alive, &truth{})
}

func startWith(t *testing.T, rc http.Handler, st store.HookStore, owns func(string) bool, alive []string, tr *truth) *Hooks {
	t.Helper()
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	h, err := Start(Config{Endpoints: []Endpoint{{URL: srv.URL + "/hook?token=x", Secret: secret}}, Node: "n1", Store: st,
		Owns: owns, Alive: func() []string { return alive }, Query: tr.query, Limits: fastLimits()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return h
}

func all(string) bool { return true }

// Changes reach the receiver signed, the latest per user: two versions of
// one user before a flush are one event; the rows are gone once delivered.
func TestDelivered(t *testing.T) {
	rc := &receiver{}
	st := store.NewMemoryHooks()
	h := start(t, rc, st, all, []string{"n1"})
	h.Changed(Event{User: "alice", Status: "online", Version: 1, AtMs: nowMs()})
	h.Changed(Event{User: "alice", Status: "offline", Version: 2, AtMs: nowMs()})
	h.Changed(Event{User: "alice", Status: "online", Version: 1, AtMs: nowMs()}) // older: ignored
	h.Changed(Event{User: "bob", Status: "online", Version: 7, AtMs: nowMs()})
	poll.Until(t, 5*time.Second, 5*time.Millisecond, "both delivered", func() bool {
		l := rc.latest()
		return l["alice"] == 2 && l["bob"] == 7
	})
	for _, ev := range rc.got() {
		if ev.User == "alice" && ev.Version != 2 {
			t.Fatalf("alice's version %d delivered: an older one than the latest pending", ev.Version)
		}
	}
	poll.Until(t, 2*time.Second, 5*time.Millisecond, "rows delivered", func() bool {
		n, _ := st.CountHooks(t.Context(), h.eps[0].key)
		return n == 0
	})
	// alice's offline row went; bob's online one stays as what the
	// receiver knows of him.
	if rows, _ := st.OwnedHooks(t.Context(), h.eps[0].key, "n1", "", 10); len(rows) != 1 || rows[0].User != "bob" || !rows[0].Delivered {
		t.Fatalf("rows kept %+v, want bob's online, delivered", rows)
	}
	if rc.bad != 0 || rc.ids[0] == "" {
		t.Fatalf("bad signatures %d, delivery ids %v", rc.bad, rc.ids)
	}
	if n := testutil.ToFloat64(h.m.delivered.WithLabelValues(h.eps[0].label)); n != 2 {
		t.Fatalf("delivered %v, want 2", n)
	}
	if l := h.eps[0].label; !strings.HasPrefix(l, "127.0.0.1:") || !strings.HasSuffix(l, "/hook") {
		t.Fatalf("label %q: want host and path without the query", h.eps[0].label)
	}
}

// A receiver that answers 500 (then 429 with Retry-After) gets the batch
// again until it takes it; every version arrives in order per user.
func TestRetriedUntilTaken(t *testing.T) {
	rc := &receiver{answer: func(n int) int {
		switch {
		case n <= 3:
			return 500
		case n == 4:
			return 429
		}
		return 200
	}, retryIn: "0"}
	h := start(t, rc, store.NewMemoryHooks(), all, []string{"n1"})
	for v := uint64(1); v <= 5; v++ {
		h.Changed(Event{User: "alice", Status: "online", Version: v, AtMs: nowMs()})
		time.Sleep(20 * time.Millisecond) // apart: each its own flush
	}
	poll.Until(t, 5*time.Second, 5*time.Millisecond, "the last version delivered", func() bool { return rc.latest()["alice"] == 5 })
	var vs []uint64
	for _, ev := range rc.got() {
		vs = append(vs, ev.Version)
	}
	if !slices.IsSorted(vs) {
		t.Fatalf("versions %v: out of order", vs)
	}
	if n := testutil.ToFloat64(h.m.retried.WithLabelValues(h.eps[0].label)); n < 4 {
		t.Fatalf("retried %v, want at least the 4 refused", n)
	}
}

// A 4xx other than 429 is not retried: counted failed, the rows dropped.
func TestRefusedIsNotRetried(t *testing.T) {
	rc := &receiver{answer: func(int) int { return 400 }}
	st := store.NewMemoryHooks()
	h := start(t, rc, st, all, []string{"n1"})
	h.Changed(Event{User: "alice", Status: "online", Version: 1, AtMs: nowMs()})
	poll.Until(t, 5*time.Second, 5*time.Millisecond, "failed counted", func() bool {
		return testutil.ToFloat64(h.m.failed.WithLabelValues(h.eps[0].label)) == 1
	})
	time.Sleep(100 * time.Millisecond)
	rc.mu.Lock()
	n := rc.n
	rc.mu.Unlock()
	if c, _ := st.CountHooks(t.Context(), h.eps[0].key); c != 0 || n != 1 {
		t.Fatalf("rows %d, requests %d: want the row dropped after one try", c, n)
	}
	if s := h.States(t.Context()); s[0].State != "failing" || s[0].LastError == "" {
		t.Fatalf("state %+v", s)
	}
}

// The store down: changes wait in memory (the latest per user, at most
// MaxPending users: one more is dropped and counted) and are delivered
// once it is back.
func TestStoreDownKeepsChanges(t *testing.T) {
	rc := &receiver{}
	st := store.NewMemoryHooks()
	st.Fail(errors.New("disk full"))
	h := start(t, rc, st, all, []string{"n1"})
	for i := range 60 {
		h.Changed(Event{User: "u" + string(rune('A'+i)), Status: "online", Version: 1, AtMs: nowMs()})
	}
	poll.Until(t, 2*time.Second, 5*time.Millisecond, "store errors counted", func() bool { return testutil.ToFloat64(h.m.storeErrors) > 0 })
	// Between flushes (each takes them and puts them back) 50 wait.
	poll.Until(t, 2*time.Second, time.Millisecond, "50 pending", func() bool { return h.pendingLen() == 50 })
	if d := testutil.ToFloat64(h.m.dropped); d != 10 {
		t.Fatalf("dropped %v, want 10 over MaxPending 50", d)
	}
	st.Fail(nil)
	poll.Until(t, 5*time.Second, 5*time.Millisecond, "the 50 delivered", func() bool { return len(rc.latest()) == 50 })
	if h.pendingLen() != 0 {
		t.Fatalf("%d still pending", h.pendingLen())
	}
}

// Rows a dead node left are claimed by the node that owns the users' views
// now, and delivered; rows of users it does not own, or of a live node,
// stay.
func TestOrphansClaimed(t *testing.T) {
	rc := &receiver{}
	st := store.NewMemoryHooks()
	h := start(t, rc, st, func(u string) bool { return u != "carol" }, []string{"n1", "n3"})
	k := h.eps[0].key
	body := func(u string) []byte { b, _ := json.Marshal(Event{User: u, Status: "offline", Version: 9}); return b }
	if err := st.PutHooks(t.Context(), []store.HookRow{
		{Endpoint: k, User: "alice", Version: 9, Owner: "n2", Shard: shardOf("alice"), Body: body("alice")},
		{Endpoint: k, User: "carol", Version: 9, Owner: "n2", Shard: shardOf("carol"), Body: body("carol")},
		{Endpoint: k, User: "dave", Version: 9, Owner: "n3", Shard: shardOf("dave"), Body: body("dave")},
	}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, 5*time.Millisecond, "alice delivered by n1", func() bool { return rc.latest()["alice"] == 9 })
	time.Sleep(100 * time.Millisecond)
	if l := rc.latest(); len(l) != 1 {
		t.Fatalf("delivered %v: carol is not n1's, dave's node lives", l)
	}
	if n := testutil.ToFloat64(h.m.claimed.WithLabelValues(h.eps[0].label)); n != 1 {
		t.Fatalf("claimed %v", n)
	}
}

// A receiver that never answers in time holds up no caller: Changed
// returns at once while every POST hangs, and memory stays at a row per
// user in the store.
func TestSlowReceiverBlocksNobody(t *testing.T) {
	hang := make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // so that the server sees the client go
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	st := store.NewMemoryHooks()
	h := start(t, slow, st, all, []string{"n1"})
	t.Cleanup(func() { close(hang) }) // first: the server's Close waits for its handlers
	began := time.Now()
	for round := range 20 {
		for u := range 30 {
			h.Changed(Event{User: "u" + string(rune('A'+u)), Status: "online", Version: uint64(round + 1), AtMs: nowMs()})
		}
	}
	if d := time.Since(began); d > 200*time.Millisecond {
		t.Fatalf("600 changes took %v while the receiver hung", d)
	}
	poll.Until(t, 2*time.Second, 5*time.Millisecond, "written", func() bool { return h.pendingLen() == 0 })
	if n, _ := st.CountHooks(t.Context(), h.eps[0].key); n != 30 {
		t.Fatalf("rows %d, want one per user (30)", n)
	}
}

// A dead node's delivered row says alice is online, but her view (on this
// node now) says offline: the change the dead node published and never
// wrote. The new owner tells the receiver, at a higher version.
func TestClaimedRowsChecked(t *testing.T) {
	rc := &receiver{}
	st := store.NewMemoryHooks()
	tr := &truth{m: map[string]*messages.ViewState{
		"bob": {User: "bob", Online: true, Show: messages.Show_available, Version: 3,
			Devices: []*messages.DeviceState{{Device: "phone", Node: "n1", Platform: messages.Platform_mobile, Activity: messages.Activity_active}}},
	}}
	h := startWith(t, rc, st, all, []string{"n1"}, tr)
	k := h.eps[0].key
	put := func(ev Event) {
		b, _ := json.Marshal(ev)
		if err := st.PutHooks(t.Context(), []store.HookRow{{Endpoint: k, User: ev.User, Version: ev.Version, Owner: "n2", Shard: shardOf(ev.User), Body: b}}); err != nil {
			t.Fatal(err)
		}
		if err := st.DoneHooks(t.Context(), k, []store.HookKey{{User: ev.User, Version: ev.Version, Keep: true}}); err != nil {
			t.Fatal(err)
		}
	}
	put(Event{User: "alice", Status: "online", Version: 100, Show: "available", Devices: []Device{{Device: "phone", Platform: "mobile", Activity: "active", Node: "n2"}}})
	put(Event{User: "bob", Status: "online", Version: 3, Show: "available", Devices: []Device{{Device: "phone", Platform: "mobile", Activity: "active", Node: "n1"}}})
	poll.Until(t, 5*time.Second, 5*time.Millisecond, "alice's offline told", func() bool { return rc.latest()["alice"] > 100 })
	time.Sleep(100 * time.Millisecond)
	got := rc.got()
	if len(got) != 1 || got[0].Status != "offline" || got[0].Reason != "owner_crash" {
		t.Fatalf("received %+v, want alice's offline alone (bob's row says what his view says)", got)
	}
	if n := testutil.ToFloat64(h.m.rechecked.WithLabelValues(h.eps[0].label)); n != 1 {
		t.Fatalf("rechecked %v, want 1", n)
	}
}

// nowMs is an event's publication time: after the hooks started, so their
// first sweep takes it for this incarnation's.
func nowMs() int64 { return time.Now().UnixMilli() }
