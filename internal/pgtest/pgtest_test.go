package pgtest

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// A server launched in a directory given relative to the working one (as
// `make chaos` gives the store scenarios their report directory) starts,
// answers, stops and starts again.
func TestLaunchInARelativeDirectory(t *testing.T) {
	if _, err := binDir(); err != nil {
		t.Skip("no PostgreSQL binaries (make tools installs them):", err)
	}
	base, err := os.MkdirTemp("", "pgtest-") // not t.TempDir: as root, its parent keeps the postgres user out
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil { // initdb goes back to the working directory
		t.Fatal(err)
	}
	t.Chdir(base)
	if err := os.MkdirAll(filepath.Join("report", "pg"), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := Launch(filepath.Join("report", "pg"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	ping := func() error {
		db, err := sql.Open("pgx", in.DSN)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(context.Background())
	}
	if err := ping(); err != nil {
		t.Fatal(err)
	}
	if err := in.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	if err := ping(); err != nil {
		t.Fatal(err)
	}
}
