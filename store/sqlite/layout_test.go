package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/presence-im/presence/store"
)

// A new file's keyed tables are WITHOUT ROWID (sqliteSchema).
func TestNewFileTablesWithoutRowid(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "presence.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, table := range []string{"policies", "floors", "last_seen"} {
		var ddl string
		if err := s.db.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = ?`, table).Scan(&ddl); err != nil {
			t.Fatal(table, err)
		}
		if wr := withoutRowid(t, s.db, table); !wr {
			t.Errorf("%s: a rowid table, want WITHOUT ROWID: %s", table, ddl)
		}
	}
}

// A file created with the rowid layout of earlier versions opens and
// serves floors, policies and last seens as before: nothing rewrites it.
func TestOldLayoutStillServes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "presence.db")
	old, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Exec(`
CREATE TABLE policies (user TEXT PRIMARY KEY, doc TEXT NOT NULL, updated_ms INTEGER NOT NULL);
CREATE TABLE floors (user TEXT NOT NULL, device TEXT NOT NULL, attempt INTEGER NOT NULL, PRIMARY KEY (user, device));
CREATE TABLE last_seen (user TEXT PRIMARY KEY, at_ms INTEGER NOT NULL);
CREATE TABLE leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, token INTEGER NOT NULL, expiry_ms INTEGER NOT NULL);
INSERT INTO floors VALUES ('alice', 'phone', 7);
INSERT INTO last_seen VALUES ('alice', 60000);`); err != nil {
		t.Fatal(err)
	}
	old.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if tk, err := s.TakeFloor(ctx, "alice", "phone", 5); err != nil || tk.OK || tk.Floor != 7 {
		t.Fatalf("take 5 under floor 7 = %+v, %v; want refused at 7", tk, err)
	}
	if tk, err := s.TakeFloor(ctx, "alice", "phone", 8); err != nil || !tk.OK {
		t.Fatalf("take 8 over floor 7 = %+v, %v; want taken", tk, err)
	}
	if err := s.Put(ctx, "alice", store.PolicyDoc{Granularity: "exact", Contacts: []string{"bob"}}); err != nil {
		t.Fatal(err)
	}
	doc, ok, last, err := s.LoadView(ctx, "alice")
	if err != nil || !ok || len(doc.Contacts) != 1 || !last.Equal(time.UnixMilli(60000)) {
		t.Fatalf("view load = %+v %v %v %v", doc, ok, last, err)
	}
	if withoutRowid(t, s.db, "floors") {
		t.Fatal("the old floors table was rewritten WITHOUT ROWID")
	}
}

// withoutRowid reports whether table is a WITHOUT ROWID table.
func withoutRowid(t *testing.T, db *sql.DB, table string) bool {
	t.Helper()
	var wr bool
	if err := db.QueryRow(`SELECT wr FROM pragma_table_list WHERE name = ?`, table).Scan(&wr); err != nil {
		t.Fatal(table, err)
	}
	return wr
}
