package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/store"
	"github.com/presence-im/presence/store/sqlite"
)

// LoadView answers, in one query, what Get and LastSeen answer apart: for
// a user with neither, a policy only, a last seen only, and both.
func TestLoadViewAgreesWithItsTwoReads(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "presence.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	at := time.UnixMilli(1_700_000_000_123)
	doc := store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob"}}
	for _, u := range []string{"policy", "both"} {
		if err := s.Put(ctx, u, doc); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"seen", "both"} {
		if err := s.SetLastSeen(ctx, u, at); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"neither", "policy", "seen", "both"} {
		gotDoc, gotOK, gotLast, err := s.LoadView(ctx, u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		wantDoc, wantOK, _ := s.Get(ctx, u)
		wantLast, _ := s.LastSeen(ctx, u)
		if gotOK != wantOK || gotOK && gotDoc.Contacts[0] != wantDoc.Contacts[0] || !gotLast.Equal(wantLast) {
			t.Fatalf("%s: LoadView = %v %v %v, the two reads %v %v %v", u, gotDoc, gotOK, gotLast, wantDoc, wantOK, wantLast)
		}
	}
	if _, ok, last, _ := s.LoadView(ctx, "both"); !ok || !last.Equal(at) {
		t.Fatalf("both: ok %v, last seen %v, want a policy and %v", ok, last, at)
	}
}
