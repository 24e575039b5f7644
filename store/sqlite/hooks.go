package sqlite

import (
	"context"
	"strings"

	"github.com/presence-im/presence/store"
)

const hooksSchema = `CREATE TABLE IF NOT EXISTS webhook_rows (
	endpoint TEXT NOT NULL, user TEXT NOT NULL, version INTEGER NOT NULL, owner TEXT NOT NULL,
	shard INTEGER NOT NULL, at_ms INTEGER NOT NULL, body BLOB NOT NULL, delivered INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (endpoint, user));
CREATE INDEX IF NOT EXISTS webhook_rows_owner ON webhook_rows (endpoint, owner, delivered, shard, at_ms);`

// Hooks is the store's webhook rows (store.HookStore), in the same file:
// the table is made at the first call.
func (s *SQLite) Hooks(ctx context.Context) (store.HookStore, error) {
	if _, err := s.db.ExecContext(ctx, hooksSchema); err != nil {
		return nil, err
	}
	return sqliteHooks{s}, nil
}

type sqliteHooks struct{ s *SQLite }

func (h sqliteHooks) PutHooks(ctx context.Context, rows []store.HookRow) error {
	tx, err := h.s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	st, err := tx.PrepareContext(ctx, `INSERT INTO webhook_rows (endpoint, user, version, owner, shard, at_ms, body) VALUES (?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (endpoint, user) DO UPDATE SET version = excluded.version, owner = excluded.owner, shard = excluded.shard, at_ms = excluded.at_ms, body = excluded.body, delivered = 0
	WHERE excluded.version > webhook_rows.version`)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if _, err := st.ExecContext(ctx, r.Endpoint, r.User, int64(r.Version), r.Owner, r.Shard, r.AtMs, r.Body); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (h sqliteHooks) PendingHooks(ctx context.Context, endpoint, owner string, shards []int, limit int) ([]store.HookRow, error) {
	args := []any{endpoint, owner}
	for _, sh := range shards {
		args = append(args, sh)
	}
	args = append(args, limit)
	rows, err := h.s.db.QueryContext(ctx, `SELECT user, version, shard, at_ms, body FROM webhook_rows
	WHERE endpoint = ? AND owner = ? AND delivered = 0 AND shard IN (`+marks(len(shards))+`) ORDER BY at_ms, user LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.HookRow
	for rows.Next() {
		r := store.HookRow{Endpoint: endpoint, Owner: owner}
		var v int64
		if err := rows.Scan(&r.User, &v, &r.Shard, &r.AtMs, &r.Body); err != nil {
			return nil, err
		}
		r.Version = uint64(v)
		out = append(out, r)
	}
	return out, rows.Err()
}

func (h sqliteHooks) DoneHooks(ctx context.Context, endpoint string, done []store.HookKey) error {
	tx, err := h.s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	del, err := tx.PrepareContext(ctx, `DELETE FROM webhook_rows WHERE endpoint = ? AND user = ? AND version <= ?`)
	if err != nil {
		return err
	}
	keep, err := tx.PrepareContext(ctx, `UPDATE webhook_rows SET delivered = 1 WHERE endpoint = ? AND user = ? AND version <= ?`)
	if err != nil {
		return err
	}
	for _, d := range done {
		st := del
		if d.Keep {
			st = keep
		}
		if _, err := st.ExecContext(ctx, endpoint, d.User, int64(d.Version)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (h sqliteHooks) OrphanHooks(ctx context.Context, endpoint string, alive []string, limit int) ([]store.HookRow, error) {
	args := []any{endpoint}
	for _, a := range alive {
		args = append(args, a)
	}
	args = append(args, limit)
	q := `SELECT user, version, owner, shard, at_ms, body, delivered FROM webhook_rows WHERE endpoint = ?`
	if len(alive) > 0 {
		q += ` AND owner NOT IN (` + marks(len(alive)) + `)`
	}
	return h.rows(ctx, endpoint, q+` LIMIT ?`, args...)
}

func (h sqliteHooks) OwnedHooks(ctx context.Context, endpoint, owner, after string, limit int) ([]store.HookRow, error) {
	return h.rows(ctx, endpoint, `SELECT user, version, owner, shard, at_ms, body, delivered FROM webhook_rows
	WHERE endpoint = ? AND owner = ? AND user > ? ORDER BY user LIMIT ?`, endpoint, owner, after, limit)
}

// rows reads whole rows of endpoint: user, version, owner, shard, at_ms,
// body, delivered.
func (h sqliteHooks) rows(ctx context.Context, endpoint, q string, args ...any) ([]store.HookRow, error) {
	rows, err := h.s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.HookRow
	for rows.Next() {
		r := store.HookRow{Endpoint: endpoint}
		var v int64
		if err := rows.Scan(&r.User, &v, &r.Owner, &r.Shard, &r.AtMs, &r.Body, &r.Delivered); err != nil {
			return nil, err
		}
		r.Version = uint64(v)
		out = append(out, r)
	}
	return out, rows.Err()
}

func (h sqliteHooks) ClaimHooks(ctx context.Context, endpoint, from, to string, users []string) error {
	tx, err := h.s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	st, err := tx.PrepareContext(ctx, `UPDATE webhook_rows SET owner = ? WHERE endpoint = ? AND user = ? AND owner = ?`)
	if err != nil {
		return err
	}
	for _, u := range users {
		if _, err := st.ExecContext(ctx, to, endpoint, u, from); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (h sqliteHooks) CountHooks(ctx context.Context, endpoint, owner string) (int, error) {
	var n int
	err := h.s.db.QueryRowContext(ctx, `SELECT count(*) FROM webhook_rows WHERE endpoint = ? AND delivered = 0 AND (? = '' OR owner = ?)`, endpoint, owner, owner).Scan(&n)
	return n, err
}

// marks is n placeholders, comma-separated.
func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }
