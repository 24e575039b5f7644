package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/store"
	"github.com/presence-im/presence/store/sqlite"
)

// Two handles on one SQLite file (two nodes on one host) see each other's
// writes, and concurrent floor raises from both keep the maximum.
func TestSQLiteSharedByNodes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "presence.db")
	a, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if err := a.Put(ctx, "alice", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob"}}); err != nil {
		t.Fatal(err)
	}
	if d, ok, _ := b.Get(ctx, "alice"); !ok || d.Contacts[0] != "bob" {
		t.Fatalf("other node sees %+v %v", d, ok)
	}
	var wg sync.WaitGroup
	for i, s := range []*sqlite.SQLite{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := uint64(1); n <= 200; n++ {
				if err := s.RaiseFloor(ctx, "alice", "phone", n*2+uint64(i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if f, _ := a.Floor(ctx, "alice", "phone"); f != 401 {
		t.Fatalf("floor %d, want 401", f)
	}
	a.Close()
	c, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if f, _ := c.Floor(ctx, "alice", "phone"); f != 401 {
		t.Fatalf("after reopening: floor %d, want 401", f)
	}
}
