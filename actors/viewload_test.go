package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
)

// countedEnv is an env whose stores count the view's reads: LoadView,
// policy gets and last-seen reads.
func countedEnv(t *testing.T, timing config.Timing) (*env, *loaderPolicies, *countedHistory) {
	t.Helper()
	h := &countedHistory{MemoryHistory: store.NewMemoryHistory()}
	e := newEnvWith(t, Deps{Timing: timing, History: h})
	p := &loaderPolicies{MemoryPolicies: e.policies, h: h.MemoryHistory}
	e.n.deps.Policies = p
	return e, p, h
}

// aliceConnectedCounted is a countedEnv with alice's phone connected a
// second ago.
func aliceConnectedCounted(t *testing.T, timing config.Timing) (*env, *loaderPolicies, *countedHistory, *device) {
	e, p, h := countedEnv(t, timing)
	d := e.connect(e.n.Gateway(), "alice", "phone", 1)
	time.Sleep(time.Second)
	synctest.Wait()
	return e, p, h, d
}

func (p *loaderPolicies) reads(h *countedHistory) int64 {
	return p.both.Load() + p.gets.Load() + h.lastSeens.Load()
}

// A device's connect and its departure read nothing of the user's view
// from the store (the view has nobody to trim for); the departure is
// written, and the first lookup reads the view once and shows it.
func TestConnectAndLeaveReadNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e, p, h, d := aliceConnectedCounted(t, timing)
		if n := p.reads(h); n != 0 {
			t.Fatalf("a connect read the store %d times, want 0", n)
		}
		left := time.Now()
		d.close()
		time.Sleep(timing.Debounce + time.Second)
		synctest.Wait()
		if n := p.reads(h); n != 0 {
			t.Fatalf("a departure read the store %d times, want 0", n)
		}
		if last, _ := h.MemoryHistory.LastSeen(context.Background(), "alice"); !last.Equal(left.Truncate(time.Millisecond)) && !last.Equal(left) {
			t.Fatalf("stored last seen %v, want the departure %v", last, left)
		}
		st, err := e.n.Query(context.Background(), "alice")
		if err != nil {
			t.Fatal(err)
		}
		if st.GetOnline() || st.GetLastSeenMs() != left.UnixMilli() || p.reads(h) != 1 {
			t.Fatalf("lookup: online %v last seen %d (want %d), %d reads (want 1)", st.GetOnline(), st.GetLastSeenMs(), left.UnixMilli(), p.reads(h))
		}
	})
}

// Loaded late, the view keeps the later last seen of the store's and its
// own departure's.
func TestLateLoadKeepsTheLatestLastSeen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stored time.Duration // against the departure
	}{{"stored earlier", -time.Hour}, {"stored later", time.Minute}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				timing := config.Fast()
				e, _, h := countedEnv(t, timing)
				d := e.connect(e.n.Gateway(), "alice", "phone", 1)
				time.Sleep(time.Second)
				left := time.Now()
				stored := left.Add(tc.stored).Truncate(time.Millisecond)
				if err := h.MemoryHistory.SetLastSeen(context.Background(), "alice", stored); err != nil {
					t.Fatal(err)
				}
				d.close()
				time.Sleep(timing.Debounce + time.Second)
				synctest.Wait()
				st, err := e.n.Query(context.Background(), "alice")
				if err != nil {
					t.Fatal(err)
				}
				want := max(stored.UnixMilli(), left.UnixMilli())
				if st.GetLastSeenMs() != want {
					t.Fatalf("last seen %d, want %d (the later of stored %d and the departure %d)", st.GetLastSeenMs(), want, stored.UnixMilli(), left.UnixMilli())
				}
			})
		})
	}
}

// A subscriber of a user whose view was activated by her connect, before
// anything read her policy, is served by that policy: read before the
// trim, the one written while nobody watched included.
func TestSubscriberOfAnUnloadedViewGetsItsPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e, p, h, d := aliceConnectedCounted(t, timing)
		e.policy("alice", core.Exact, "bob") // PolicyChanged to a view not loaded: nothing read
		synctest.Wait()
		if n := p.reads(h); n != 0 {
			t.Fatalf("a policy change to a view nobody watches read the store %d times, want 0", n)
		}
		bob := e.subscribe("alice", "bob")
		carol := e.subscribe("alice", "carol")
		time.Sleep(time.Second)
		synctest.Wait()
		if got := bob.snapshot(); len(got) != 1 || !got[0].GetVisible() || got[0].GetPresence().GetStatus().String() != "online" {
			t.Fatalf("bob, a contact: snapshot %v, want alice online", got)
		}
		if got := carol.snapshot(); len(got) != 1 || got[0].GetVisible() {
			t.Fatalf("carol, not a contact: snapshot %v, want nothing visible", got)
		}
		d.close()
	})
}

// A user who goes invisible before her device is up (her show overtook
// the device's up, or a re-created view heard it first) keeps, for
// others, the last seen the store held before: her departure while
// invisible, written since, does not stand in for it when a subscriber
// makes the view read the store.
func TestInvisibleBeforeUpKeepsTheLastSeenOthersKnew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e, _, h := countedEnv(t, timing)
		before := time.Now().Add(-time.Hour).Truncate(time.Minute)
		if err := h.MemoryHistory.SetLastSeen(context.Background(), "alice", before); err != nil {
			t.Fatal(err)
		}
		e.policy("alice", core.Exact, "bob")
		e.n.dir.Send(KindView, "alice", &messages.DeviceShow{User: "alice", Device: "phone", Show: messages.Show_invisible})
		synctest.Wait()
		d := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(time.Minute)
		d.close()
		time.Sleep(timing.Debounce + time.Second)
		synctest.Wait()
		bob := e.subscribe("alice", "bob")
		synctest.Wait()
		got := bob.snapshot()
		if len(got) != 1 || got[0].GetPresence().GetLastSeenMinute() != uint32(before.Unix()/60) {
			t.Fatalf("bob's snapshot %v, want alice's last seen %v (before she went invisible)", got, before)
		}
	})
}
