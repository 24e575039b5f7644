package store_test

import (
	"context"
	"errors"
	"path/filepath"
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
}

type memoryBoth struct {
	*store.MemoryPolicies
	*store.MemoryHistory
}

func implementations(t *testing.T) map[string]func() both {
	return map[string]func() both{
		"memory": func() both { return memoryBoth{store.NewMemoryPolicies(), store.NewMemoryHistory()} },
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
