// Package sqlite is the embedded store of presence: privacy policies,
// attempt floors and last-seen times in one SQLite file (WAL).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// SQLite is a store.PolicyStore and store.HistoryStore in one SQLite file in WAL mode:
// the embedded default, shared by every node on one host (WAL lets the
// nodes read while one writes; busy_timeout queues the writers). Safe for
// concurrent use.
type SQLite struct {
	db *sql.DB
	w  *store.Batcher // the one writer of floors and last-seen times
	st statements
}

// statements are the queries of every connect (a view's first activation
// reads the user's policy and last-seen time, a lease its floor) and of
// every batch, prepared once: database/sql keeps each prepared per
// connection of the pool. Unprepared, SQLite parsed and planned the text
// anew each time, a visible share of the node's CPU while devices
// connected (BENCHMARKS.md, connect rate, has the profile).
type statements struct {
	policy, floor, lastSeen, view, putFloor, takeFloor, putLastSeen *sql.Stmt
}

func (st *statements) prepare(ctx context.Context, db *sql.DB) error {
	for _, q := range []struct {
		to  **sql.Stmt
		sql string
	}{
		{&st.policy, `SELECT doc FROM policies WHERE user = ?`},
		{&st.floor, `SELECT attempt FROM floors WHERE user = ? AND device = ?`},
		{&st.lastSeen, `SELECT at_ms FROM last_seen WHERE user = ?`},
		{&st.view, `SELECT (SELECT doc FROM policies WHERE user = ?1), (SELECT at_ms FROM last_seen WHERE user = ?1)`},
		{&st.putFloor, `INSERT INTO floors (user, device, attempt) VALUES (?, ?, ?)
		ON CONFLICT (user, device) DO UPDATE SET attempt = max(attempt, excluded.attempt)`},
		// a row changes only if the attempt is written: new, or above
		{&st.takeFloor, `INSERT INTO floors (user, device, attempt) VALUES (?, ?, ?)
		ON CONFLICT (user, device) DO UPDATE SET attempt = excluded.attempt WHERE excluded.attempt > attempt`},
		{&st.putLastSeen, `INSERT INTO last_seen (user, at_ms) VALUES (?, ?)
		ON CONFLICT (user) DO UPDATE SET at_ms = max(at_ms, excluded.at_ms)`},
	} {
		var err error
		if *q.to, err = db.PrepareContext(ctx, q.sql); err != nil {
			return err
		}
	}
	return nil
}

// MaxConns bounds the handle's open connections: the writer's and a few
// readers' (WAL lets them read while it writes). Unbounded, a burst of
// lookups opened one file descriptor each, next to the devices' sockets.
const MaxConns = 4

// CacheKiB bounds each connection's page cache (SQLite's cache_size, in
// KiB). SQLite's default, 2,000 KiB, filled as a node met more users and
// stayed, in the process's anonymous memory outside Go's heap, once many
// users' rows had been read over the pool, so a node's RSS grew over the
// first waves of the churn benchmark and never came back
// (docs/operations.md, "Memory"). The rows a node reads are spread over the
// whole table and the OS page cache holds the file, so a small cache costs
// no time that shows (BenchmarkViewLoadPageCache: time per view load and
// the anonymous memory it leaves, default against this).
const CacheKiB = 512

// sqliteSchema: the tables read and written by key are WITHOUT ROWID, so
// a key's row is found in one B-tree, not through the primary key's index
// and then the table (half the pages per view load and per floor, and
// half the pages a commit appends to the WAL: BenchmarkTakeFloor,
// BenchmarkViewLoadPageCache). A file created before keeps its layout,
// which serves the same queries (TestOldLayoutStillServes): nodes share
// the file, so none rewrites it under the others.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS policies (user TEXT PRIMARY KEY, doc TEXT NOT NULL, updated_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS floors (user TEXT NOT NULL, device TEXT NOT NULL, attempt INTEGER NOT NULL, PRIMARY KEY (user, device)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS last_seen (user TEXT PRIMARY KEY, at_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, token INTEGER NOT NULL, expiry_ms INTEGER NOT NULL);
`

// Open opens (creating if needed) the store at path.
func Open(path string) (*SQLite, error) { return open(path, CacheKiB) }

// open is Open with each connection's page cache of cacheKiB (the
// benchmark compares SQLite's default with CacheKiB).
func open(path string, cacheKiB int) (*SQLite, error) {
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(5000)", "synchronous(NORMAL)", "foreign_keys(ON)", fmt.Sprintf("cache_size(-%d)", cacheKiB)} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: sqlite %s: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: sqlite %s: schema: %w", path, err)
	}
	db.SetMaxOpenConns(MaxConns)
	db.SetMaxIdleConns(MaxConns)
	s := &SQLite{db: db}
	if err := s.st.prepare(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: sqlite %s: prepare: %w", path, err)
	}
	s.w = store.NewBatcher("sqlite", s.commit, 0, 0)
	return s, nil
}

// Close commits the queued writes and closes the database.
func (s *SQLite) Close() error {
	s.w.Close()
	return s.db.Close()
}

// Collectors are the writer's metrics.
func (s *SQLite) Collectors() []prometheus.Collector { return s.w.Collectors() }

// commit writes a batch of floors and last-seen times in one transaction.
func (s *SQLite) commit(ctx context.Context, ws []store.Write) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	// each statement bound to tx at its first use: most commits of a
	// connect storm hold taken floors only, of a mass disconnect last seens
	var floor, lastSeen, take, read *sql.Stmt
	stmt := func(st **sql.Stmt, of *sql.Stmt) *sql.Stmt {
		if *st == nil {
			*st = tx.StmtContext(ctx, of)
		}
		return *st
	}
	for _, w := range ws {
		switch {
		case w.Take != nil:
			err = take1(ctx, stmt(&take, s.st.takeFloor), func() *sql.Stmt { return stmt(&read, s.st.floor) }, w)
		case w.Device != "":
			_, err = stmt(&floor, s.st.putFloor).ExecContext(ctx, w.User, w.Device, int64(w.Attempt))
		default:
			_, err = stmt(&lastSeen, s.st.putLastSeen).ExecContext(ctx, w.User, w.At.UnixMilli())
		}
		if err != nil {
			return err
		}
	}
	return tx.Commit()
}

// take1 writes a taken floor (store.Write.Take) with a transaction's
// statements: the attempt if it is above the floor, and otherwise it reads
// the floor that stands.
func take1(ctx context.Context, take *sql.Stmt, read func() *sql.Stmt, w store.Write) error {
	res, err := take.ExecContext(ctx, w.User, w.Device, int64(w.Attempt))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		*w.Take = store.Taken{OK: true}
		return err
	}
	var n int64
	if err := read().QueryRowContext(ctx, w.User, w.Device).Scan(&n); err != nil {
		return err
	}
	*w.Take = store.Taken{Floor: uint64(n)}
	return nil
}

func (s *SQLite) Get(ctx context.Context, user string) (store.PolicyDoc, bool, error) {
	var raw string
	err := s.st.policy.QueryRowContext(ctx, user).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return store.PolicyDoc{}, false, nil
	}
	return store.DecodePolicy(user, []byte(raw), err)
}

// LoadView reads the user's policy and last seen in one query
// (store.ViewLoader): a view's activation, once per user that connects
// cold, made two reads, each a visible share of the node's CPU while
// devices connected (BENCHMARKS.md, connect rate, has the profile).
func (s *SQLite) LoadView(ctx context.Context, user string) (store.PolicyDoc, bool, time.Time, error) {
	var doc sql.NullString
	var ms sql.NullInt64
	if err := s.st.view.QueryRowContext(ctx, user).Scan(&doc, &ms); err != nil {
		return store.PolicyDoc{}, false, time.Time{}, fmt.Errorf("store: view of %s: %w", user, err)
	}
	var last time.Time
	if ms.Valid {
		last = time.UnixMilli(ms.Int64)
	}
	if !doc.Valid {
		return store.PolicyDoc{}, false, last, nil
	}
	d, ok, err := store.DecodePolicy(user, []byte(doc.String), nil)
	return d, ok, last, err
}

func (s *SQLite) Put(ctx context.Context, user string, d store.PolicyDoc) error {
	raw, err := store.EncodePolicy(user, d)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO policies (user, doc, updated_ms) VALUES (?, ?, ?)
		ON CONFLICT (user) DO UPDATE SET doc = excluded.doc, updated_ms = excluded.updated_ms`,
		user, string(raw), time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("store: put policy of %s: %w", user, err)
	}
	return nil
}

func (s *SQLite) Floor(ctx context.Context, user, device string) (uint64, error) {
	var n int64
	err := s.st.floor.QueryRowContext(ctx, user, device).Scan(&n)
	return store.ReadFloor(user, device, n, errors.Is(err, sql.ErrNoRows), err)
}

// TakeFloor makes attempt the floor if it is above, through the writer's
// batch (store.FloorTaker): a cold handshake's one trip to the store.
func (s *SQLite) TakeFloor(ctx context.Context, user, device string, attempt uint64) (store.Taken, error) {
	return s.w.TakeFloor(ctx, user, device, attempt)
}

func (s *SQLite) RaiseFloor(ctx context.Context, user, device string, attempt uint64) error {
	return s.w.RaiseFloor(ctx, user, device, attempt)
}

func (s *SQLite) LastSeen(ctx context.Context, user string) (time.Time, error) {
	var ms int64
	err := s.st.lastSeen.QueryRowContext(ctx, user).Scan(&ms)
	return store.ReadLastSeen(user, ms, errors.Is(err, sql.ErrNoRows), err)
}

func (s *SQLite) SetLastSeen(ctx context.Context, user string, t time.Time) error {
	err := s.w.Do(ctx, store.Write{User: user, At: t})
	if err != nil {
		return fmt.Errorf("store: set last seen of %s: %w", user, err)
	}
	return nil
}

// KeepLastSeen hands t to the writer without waiting for its commit
// (store.LastSeenKeeper).
func (s *SQLite) KeepLastSeen(user string, t time.Time) error {
	if err := s.w.Keep(store.Write{User: user, At: t}); err != nil {
		return fmt.Errorf("store: keep last seen of %s: %w", user, err)
	}
	return nil
}

// ArbiterClock is SQLite's clock: the host's, which every node of one file
// shares.
func (s *SQLite) ArbiterClock(ctx context.Context) (time.Time, error) {
	var ms int64
	if err := s.db.QueryRowContext(ctx, `SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("store: arbiter clock: %w", err)
	}
	return time.UnixMilli(ms), nil
}

// TakeArbiter is one compare-and-set upsert: the row changes only when it is
// the holder's or expired; SQLite serialises the writers of the file.
// The table keeps its first name, leases, so existing files need no
// migration.
func (s *SQLite) TakeArbiter(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (store.Arbiter, error) {
	if err := store.CheckArbiter(name, holder, ttl); err != nil {
		return store.Arbiter{}, err
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO leases (name, holder, token, expiry_ms) VALUES (?, ?, 1, ?)
		ON CONFLICT (name) DO UPDATE SET
			token = CASE WHEN leases.holder = excluded.holder THEN leases.token ELSE leases.token + 1 END,
			holder = excluded.holder, expiry_ms = excluded.expiry_ms
		WHERE leases.holder = excluded.holder OR leases.expiry_ms <= ?`,
		name, holder, now.Add(ttl).UnixMilli(), now.UnixMilli())
	if err != nil {
		return store.Arbiter{}, fmt.Errorf("store: take arbiter %s: %w", name, err)
	}
	l := store.Arbiter{Name: name}
	var token, exp int64
	err = s.db.QueryRowContext(ctx, `SELECT holder, token, expiry_ms FROM leases WHERE name = ?`, name).Scan(&l.Holder, &token, &exp)
	if err != nil {
		return store.Arbiter{}, fmt.Errorf("store: read arbiter %s: %w", name, err)
	}
	l.Token, l.Expiry = uint64(token), time.UnixMilli(exp)
	return l, nil
}
