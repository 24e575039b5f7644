package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/internal/pgtest"
	"github.com/presence-im/presence/store"
	"github.com/presence-im/presence/store/postgres"
	"github.com/presence-im/presence/store/sqlite"
)

// stores are the implementations every contract test runs against; both
// returned values are the same store.
type both interface {
	store.PolicyStore
	store.HistoryStore
	store.ArbiterStore
}

type memoryBoth struct {
	*store.MemoryPolicies
	*store.MemoryHistory
	*store.MemoryArbiters
}

func implementations(t *testing.T) map[string]func() both {
	return map[string]func() both{
		"memory": func() both {
			return memoryBoth{store.NewMemoryPolicies(), store.NewMemoryHistory(), store.NewMemoryArbiters()}
		},
		"postgres": func() both {
			s, err := postgres.Open(context.Background(), pgtest.Start(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			return s
		},
		"sqlite": func() both {
			s, err := sqlite.Open(filepath.Join(t.TempDir(), "presence.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
}

func TestStoreContract(t *testing.T) {
	ctx := context.Background()
	for name, open := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			if _, ok, err := s.Get(ctx, "alice"); ok || err != nil {
				t.Fatalf("empty store: ok %v err %v", ok, err)
			}
			good := store.PolicyDoc{Granularity: core.Coarse, Contacts: []string{"bob"}, Blocked: []string{"eve"}}
			if err := s.Put(ctx, "alice", good); err != nil {
				t.Fatal(err)
			}
			err := s.Put(ctx, "alice", store.PolicyDoc{Granularity: "fuzzy"})
			if !errors.Is(err, store.ErrBadPolicy) {
				t.Fatalf("bad policy: %v, want ErrBadPolicy", err)
			}
			d, ok, err := s.Get(ctx, "alice")
			if !ok || err != nil || d.Granularity != core.Coarse || len(d.Contacts) != 1 || d.Blocked[0] != "eve" {
				t.Fatalf("after a refused write: %+v %v %v, want the first policy", d, ok, err)
			}

			for _, a := range []uint64{5, 3, 9, 7} {
				if err := s.RaiseFloor(ctx, "alice", "phone", a); err != nil {
					t.Fatal(err)
				}
			}
			if f, err := s.Floor(ctx, "alice", "phone"); f != 9 || err != nil {
				t.Fatalf("floor %d %v, want 9 (never lowered)", f, err)
			}
			if f, _ := s.Floor(ctx, "alice", "laptop"); f != 0 {
				t.Fatalf("unknown device floor %d", f)
			}
			t1 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
			_ = s.SetLastSeen(ctx, "alice", t1)
			_ = s.SetLastSeen(ctx, "alice", t1.Add(-time.Hour))
			if got, _ := s.LastSeen(ctx, "alice"); !got.Equal(t1) {
				t.Fatalf("last seen %v, want %v (never moved back)", got, t1)
			}
		})
	}
}

// The split-brain lease: compare-and-set on holder and expiry, a token that
// grows with each new holder, and a refused take that changes nothing.
func TestStoreLeaseContract(t *testing.T) {
	ctx := context.Background()
	t0 := time.UnixMilli(1_700_000_000_000)
	ttl := 3 * time.Second
	for name, open := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			take := func(holder string, at time.Time) store.Arbiter {
				t.Helper()
				l, err := s.TakeArbiter(ctx, "split-brain", holder, at, ttl)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			l := take("n1", t0)
			if l.Holder != "n1" || l.Token != 1 || !l.Expiry.Equal(t0.Add(ttl)) {
				t.Fatalf("free lease: %+v, want n1's, token 1, expiry t0+ttl", l)
			}
			if l := take("n2", t0.Add(time.Second)); l.Holder != "n1" || l.Token != 1 || !l.Expiry.Equal(t0.Add(ttl)) {
				t.Fatalf("n2 while n1 holds it: %+v, want n1's lease unchanged", l)
			}
			if l := take("n1", t0.Add(2*time.Second)); l.Holder != "n1" || l.Token != 1 || !l.Expiry.Equal(t0.Add(2*time.Second+ttl)) {
				t.Fatalf("renewal: %+v, want n1's, same token, later expiry", l)
			}
			if l := take("n2", t0.Add(2*time.Second+ttl)); l.Holder != "n2" || l.Token != 2 {
				t.Fatalf("n2 at n1's expiry: %+v, want n2's with token 2", l)
			}
			if l := take("n1", t0.Add(3*time.Second+ttl)); l.Holder != "n2" || l.Token != 2 {
				t.Fatalf("n1 back while n2 holds it: %+v, want n2's", l)
			}
			if _, err := s.TakeArbiter(ctx, "split-brain", "", t0, ttl); !errors.Is(err, store.ErrBadArbiter) {
				t.Fatalf("empty holder: %v, want ErrBadArbiter", err)
			}
			if _, err := s.TakeArbiter(ctx, "split-brain", "n3", t0, 0); !errors.Is(err, store.ErrBadArbiter) {
				t.Fatalf("zero ttl: %v, want ErrBadArbiter", err)
			}
			if l := take("n2", t0.Add(4*time.Second+ttl)); l.Holder != "n2" || l.Token != 2 {
				t.Fatalf("after refused requests: %+v, want n2's lease, token 2", l)
			}
		})
	}
}

// Every store tells its clock: within a second of this process's here
// (the database server runs on this host in the tests).
func TestStoreLeaseClock(t *testing.T) {
	for name, open := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			at, err := open().ArbiterClock(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(at); d > time.Second || d < -time.Second {
				t.Fatalf("the store's clock is %v off this process's", d)
			}
		})
	}
}

// Many nodes racing for a free lease: exactly one wins, and all agree who.
func TestStoreLeaseRace(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	for name, open := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			const n = 8
			got := make(chan store.Arbiter, n)
			errs := make(chan error, n)
			for i := range n {
				go func() {
					l, err := s.TakeArbiter(ctx, "race", fmt.Sprintf("n%d", i), now, time.Minute)
					errs <- err
					got <- l
				}()
			}
			winner := ""
			for range n {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
				l := <-got
				if winner == "" {
					winner = l.Holder
				}
				if l.Holder != winner || l.Token != 1 {
					t.Fatalf("racers disagree: %+v, first saw %s with token 1", l, winner)
				}
			}
		})
	}
}

// A taken floor is written only above the stored one, in one trip, and
// otherwise says the floor that stands; takes racing in one batch agree
// with some order of them; a bad attempt is refused and writes nothing.
// The memory store cannot take a floor in one trip: store.TakeFloor then
// reads and raises, with the same answers.
func TestStoreTakeFloor(t *testing.T) {
	ctx := context.Background()
	for name, open := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			_, native := s.(store.FloorTaker)
			if native == (name == "memory") {
				t.Fatalf("%s: FloorTaker %v", name, native)
			}
			for _, c := range []struct {
				attempt uint64
				want    store.Taken
			}{
				{5, store.Taken{OK: true}}, // no floor yet
				{5, store.Taken{Floor: 5}}, // the same attempt again: stale
				{3, store.Taken{Floor: 5}},
				{9, store.Taken{OK: true}},
			} {
				got, err := store.TakeFloor(ctx, s, "alice", "phone", c.attempt)
				if err != nil || got != c.want {
					t.Fatalf("take %d: %+v %v, want %+v", c.attempt, got, err, c.want)
				}
			}
			if f, err := s.Floor(ctx, "alice", "phone"); f != 9 || err != nil {
				t.Fatalf("floor %d %v, want 9", f, err)
			}
			if _, err := store.TakeFloor(ctx, s, "alice", "tablet", 1<<63); err == nil {
				t.Fatal("attempt 2^63 of a new device taken, want an error")
			}
			if f, _ := s.Floor(ctx, "alice", "tablet"); f != 0 {
				t.Fatalf("a refused take wrote floor %d", f)
			}

			// 20 takes at once (one batch or a few): the highest is taken,
			// each refused one names a floor at least its attempt, and no
			// two are taken in an order that lowers the floor.
			res := make([]store.Taken, 21)
			errs := make(chan error, 20)
			var wg sync.WaitGroup
			for a := uint64(1); a <= 20; a++ {
				wg.Go(func() {
					var err error
					res[a], err = store.TakeFloor(ctx, s, "bob", "phone", a)
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil && native {
					t.Fatal(err)
				}
			}
			if !native {
				return // two trips: racing takes of one device are the lease actor's to order
			}
			if !res[20].OK {
				t.Fatalf("the highest attempt was not taken: %+v", res[20])
			}
			for a := uint64(1); a < 20; a++ {
				if !res[a].OK && res[a].Floor < a {
					t.Fatalf("take %d refused with floor %d below it", a, res[a].Floor)
				}
			}
			if f, _ := s.Floor(ctx, "bob", "phone"); f != 20 {
				t.Fatalf("floor %d after the race, want 20", f)
			}
		})
	}
}
