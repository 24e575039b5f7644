package actors

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
)

// pausedHistory is a store whose writer (a store.Batcher, as PostgreSQL's
// and SQLite's) cannot commit until resumed, as a paused PostgreSQL; its
// floors go through at once, so devices connect before.
type pausedHistory struct {
	*store.MemoryHistory
	w       *store.Batcher
	resume  chan struct{}
	commits atomic.Int64
}

func newPausedHistory(t *testing.T) *pausedHistory {
	h := &pausedHistory{MemoryHistory: store.NewMemoryHistory(), resume: make(chan struct{})}
	h.w = store.NewBatcher("paused", h.commit, 0, 0)
	t.Cleanup(h.w.Close) // after the node stops
	return h
}

func (h *pausedHistory) commit(ctx context.Context, ws []store.Write) error {
	select {
	case <-h.resume:
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, w := range ws {
		_ = h.MemoryHistory.SetLastSeen(ctx, w.User, w.At)
	}
	h.commits.Add(1)
	return nil
}

func (h *pausedHistory) SetLastSeen(ctx context.Context, user string, t time.Time) error {
	return h.w.Do(ctx, store.Write{User: user, At: t})
}

func (h *pausedHistory) KeepLastSeen(user string, t time.Time) error {
	return h.w.Keep(store.Write{User: user, At: t})
}

// A departure's last seen does not hold up its view while the store
// hangs: the view publishes the offline, answers a query and takes the
// device back at once, and the last seen is in the store once it
// answers again.
func TestViewAnswersWhileTheStoreHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		h := newPausedHistory(t)
		e := newEnvWith(t, Deps{Timing: timing, History: h})
		e.policy("alice", core.Exact, "bob")
		p := e.subscribe("alice", "bob")
		d := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(time.Second)
		d.close()
		left := time.Now()
		time.Sleep(timing.Debounce + 100*time.Millisecond) // the offline is published, its last seen handed over
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		st, err := e.n.Query(ctx, "alice")
		if err != nil {
			t.Fatalf("the view does not answer while the store hangs: %v", err)
		}
		if st.GetOnline() || st.GetLastSeenMs() == 0 {
			t.Fatalf("alice online %v, last seen %d after she left, want offline and seen", st.GetOnline(), st.GetLastSeenMs())
		}
		if evs := p.all(); len(evs) == 0 || evs[len(evs)-1].p.GetStatus() != messages.Status_offline {
			t.Fatalf("bob heard %v, want alice offline", e.statuses(p))
		}
		if at, _ := h.MemoryHistory.LastSeen(context.Background(), "alice"); !at.IsZero() || h.commits.Load() != 0 {
			t.Fatalf("last seen %v stored while the store hangs", at)
		}
		e.connect(e.n.Gateway(), "alice", "phone", 2) // the view takes her back
		time.Sleep(40 * time.Second)                  // past the writer's commit deadline: it keeps the last seen, tries again
		close(h.resume)
		time.Sleep(2 * store.RetryEvery)
		at, err := h.MemoryHistory.LastSeen(context.Background(), "alice")
		if err != nil || at.UnixMilli() != st.GetLastSeenMs() || at.Before(left.Add(-timing.Heartbeat)) {
			t.Fatalf("last seen in the store %v (%v) once it answers, want %v", at, err, time.UnixMilli(st.GetLastSeenMs()))
		}
	})
}

// A node tells the cluster which of its store's operations fail
// (NodeCounts.store_failing, from store.Health), and stops once a call
// works again.
func TestNodeCountsSayTheStoreFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := downHistory{store.NewMemoryHistory(), &atomic.Bool{}} // view_test.go
		down.down.Store(true)
		m := store.NewStoreMetrics(nil)
		m.Health = store.NewHealth(nil, nil)
		h := m.InstrumentHistory(down)
		e := newEnvWith(t, Deps{Timing: config.Fast(), History: h})
		counts := func() []string {
			t.Helper()
			res, err := e.n.System().Root.RequestFuture(actor.NewPID(e.n.System().Address(), StatsName), &messages.CountsQuery{}, time.Second).Result()
			if err != nil {
				t.Fatal(err)
			}
			return res.(*messages.NodeCounts).GetStoreFailing()
		}
		if ops := counts(); len(ops) != 0 {
			t.Fatalf("store failing %v before any call failed", ops)
		}
		if _, err := e.tryConnect(e.n.Gateway(), "alice", "phone", 1); err == nil {
			t.Fatal("a handshake accepted with its floor unread")
		}
		if ops := counts(); !slices.Equal(ops, []string{"floor"}) {
			t.Fatalf("store failing %v with floors unread, want [floor]", ops)
		}
		down.down.Store(false)
		e.connect(e.n.Gateway(), "alice", "phone", 2)
		if ops := counts(); len(ops) != 0 {
			t.Fatalf("store failing %v once it answers", ops)
		}
	})
}

// downPolicies is a policy store whose reads fail while down (the
// writes, the test's own setup, go through).
type downPolicies struct {
	*store.MemoryPolicies
	down  *atomic.Bool
	reads atomic.Int64
}

func (p *downPolicies) Get(ctx context.Context, user string) (store.PolicyDoc, bool, error) {
	p.reads.Add(1)
	if p.down.Load() {
		return store.PolicyDoc{}, false, errors.New("connection refused")
	}
	return p.MemoryPolicies.Get(ctx, user)
}

// A view loaded while the store could not give its policy shows the user
// to nobody, and reads it again, backing off, until it can: once the
// store answers, the subscriber that was trimmed out hears her online.
func TestViewRereadsAPolicyItCouldNotRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := &downPolicies{down: &atomic.Bool{}}
		e := newEnvWith(t, Deps{Timing: config.Fast(), Policies: pol})
		pol.MemoryPolicies = e.policies
		e.policy("alice", core.Exact, "bob")
		pol.down.Store(true)
		p := e.subscribe("alice", "bob")
		e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(time.Minute)
		if evs := p.all(); len(evs) != 0 {
			t.Fatalf("bob heard %v while alice's policy could not be read, want nothing", e.statuses(p))
		}
		if r := pol.reads.Load(); r < 3 || r > 8 {
			t.Fatalf("%d policy reads in a minute of a failing store, want a few, backing off", r)
		}
		pol.down.Store(false)
		time.Sleep(maxReread + time.Second)
		if evs := p.all(); len(evs) == 0 || evs[len(evs)-1].p.GetStatus() != messages.Status_online {
			t.Fatalf("bob heard %v once the store answers, want alice online", e.statuses(p))
		}
		reads := pol.reads.Load()
		time.Sleep(5 * time.Minute)
		if pol.reads.Load() != reads {
			t.Fatalf("%d more policy reads after one worked", pol.reads.Load()-reads)
		}
	})
}
