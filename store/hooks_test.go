package store_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/presence-im/presence/internal/pgtest"
	"github.com/presence-im/presence/store"
	"github.com/presence-im/presence/store/postgres"
	"github.com/presence-im/presence/store/sqlite"
)

func hookStores(t *testing.T) map[string]func() store.HookStore {
	ctx := context.Background()
	return map[string]func() store.HookStore{
		"memory": func() store.HookStore { return store.NewMemoryHooks() },
		"sqlite": func() store.HookStore {
			s, err := sqlite.Open(filepath.Join(t.TempDir(), "presence.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			h, err := s.Hooks(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return h
		},
		"postgres": func() store.HookStore {
			s, err := postgres.Open(ctx, pgtest.Start(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			h, err := s.Hooks(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return h
		},
	}
}

func users(rows []store.HookRow) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.User)
	}
	return out
}

// The webhook rows: one per endpoint and user holding the highest
// version; pending oldest first by owner and shard; a delivered row goes
// unless a newer change replaced it; orphans of a dead owner are claimed.
func TestHookStoreContract(t *testing.T) {
	ctx := context.Background()
	for name, open := range hookStores(t) {
		t.Run(name, func(t *testing.T) {
			h := open()
			row := func(user string, v uint64, owner string, shard int, at int64) store.HookRow {
				return store.HookRow{Endpoint: "e1", User: user, Version: v, Owner: owner, Shard: shard, AtMs: at, Body: []byte(`{"user":"` + user + `"}`)}
			}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(h.PutHooks(ctx, []store.HookRow{row("alice", 5, "n1", 0, 30), row("bob", 3, "n1", 1, 10), row("carol", 9, "n2", 0, 20),
				{Endpoint: "e2", User: "alice", Version: 5, Owner: "n1", AtMs: 30, Body: []byte("{}")}}))
			// An older version never replaces a newer one; a newer does.
			must(h.PutHooks(ctx, []store.HookRow{row("alice", 4, "n9", 0, 40), row("bob", 7, "n1", 1, 15)}))
			rows, err := h.PendingHooks(ctx, "e1", "n1", []int{0, 1}, 10)
			must(err)
			if !slices.Equal(users(rows), []string{"bob", "alice"}) || rows[0].Version != 7 || rows[1].Version != 5 || string(rows[1].Body) != `{"user":"alice"}` {
				t.Fatalf("pending %+v", rows)
			}
			if rows, _ := h.PendingHooks(ctx, "e1", "n1", []int{1}, 10); !slices.Equal(users(rows), []string{"bob"}) {
				t.Fatalf("shard 1: %v", users(rows))
			}
			if rows, _ := h.PendingHooks(ctx, "e1", "n1", []int{0, 1}, 1); len(rows) != 1 {
				t.Fatalf("limit 1: %v", users(rows))
			}
			// bob delivered at 7; alice delivered at 5 after a newer 6 came.
			must(h.PutHooks(ctx, []store.HookRow{row("alice", 6, "n1", 0, 50)}))
			must(h.DoneHooks(ctx, "e1", []store.HookKey{{User: "bob", Version: 7}, {User: "alice", Version: 5}}))
			rows, _ = h.PendingHooks(ctx, "e1", "n1", []int{0, 1}, 10)
			if !slices.Equal(users(rows), []string{"alice"}) || rows[0].Version != 6 {
				t.Fatalf("after done: %+v", rows)
			}
			if n, _ := h.CountHooks(ctx, "e1", ""); n != 2 {
				t.Fatalf("count e1 %d, want 2 (alice, carol)", n)
			}
			// Each owner counts its own: a sum over the nodes counts each
			// row once.
			if n1, _ := h.CountHooks(ctx, "e1", "n1"); n1 != 1 {
				t.Fatalf("count e1 of n1 %d, want 1 (alice)", n1)
			}
			if n2, _ := h.CountHooks(ctx, "e1", "n2"); n2 != 1 {
				t.Fatalf("count e1 of n2 %d, want 1 (carol)", n2)
			}
			// n2 died: its rows are orphans; n1 claims carol.
			orphans, err := h.OrphanHooks(ctx, "e1", []string{"n1", "n3"}, 10)
			must(err)
			if !slices.Equal(users(orphans), []string{"carol"}) || orphans[0].Owner != "n2" {
				t.Fatalf("orphans %+v", orphans)
			}
			must(h.ClaimHooks(ctx, "e1", "n2", "n1", []string{"carol"}))
			must(h.ClaimHooks(ctx, "e1", "n2", "n3", []string{"carol"})) // too late: n1 has it
			rows, _ = h.PendingHooks(ctx, "e1", "n1", []int{0, 1}, 10)
			if !slices.Equal(users(rows), []string{"carol", "alice"}) {
				t.Fatalf("after the claim: %v", users(rows))
			}
			if o, _ := h.OrphanHooks(ctx, "e1", []string{"n1"}, 10); len(o) != 0 {
				t.Fatalf("orphans left %v", users(o))
			}
			// Delivered and kept (an online user's): out of pending and of
			// the count, still owned, still an orphan if its owner dies; a
			// newer change makes it pending again.
			must(h.DoneHooks(ctx, "e1", []store.HookKey{{User: "carol", Version: 9, Keep: true}}))
			if rows, _ := h.PendingHooks(ctx, "e1", "n1", []int{0, 1}, 10); !slices.Equal(users(rows), []string{"alice"}) {
				t.Fatalf("pending after keep: %v", users(rows))
			}
			if n, _ := h.CountHooks(ctx, "e1", ""); n != 1 {
				t.Fatalf("count after keep %d, want 1 (alice)", n)
			}
			owned, err := h.OwnedHooks(ctx, "e1", "n1", "", 10)
			must(err)
			if !slices.Equal(users(owned), []string{"alice", "carol"}) || !owned[1].Delivered || owned[0].Delivered || string(owned[1].Body) != `{"user":"carol"}` {
				t.Fatalf("owned %+v", owned)
			}
			if page, _ := h.OwnedHooks(ctx, "e1", "n1", "alice", 10); !slices.Equal(users(page), []string{"carol"}) {
				t.Fatalf("owned after alice: %v", users(page))
			}
			if o, _ := h.OrphanHooks(ctx, "e1", []string{"n2"}, 10); len(o) != 2 {
				t.Fatalf("orphans of n1 dead: %v, want alice and carol", users(o))
			}
			must(h.PutHooks(ctx, []store.HookRow{row("carol", 10, "n1", 0, 60)}))
			if rows, _ := h.PendingHooks(ctx, "e1", "n1", []int{0, 1}, 10); !slices.Equal(users(rows), []string{"alice", "carol"}) {
				t.Fatalf("pending after carol's newer change: %v", users(rows))
			}
		})
	}
}
