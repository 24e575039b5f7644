package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/presence-im/presence/store"
)

const hooksSchema = `CREATE TABLE IF NOT EXISTS presence_webhook_rows (
	endpoint TEXT NOT NULL, user_id TEXT NOT NULL, version BIGINT NOT NULL, owner TEXT NOT NULL,
	shard INTEGER NOT NULL, at_ms BIGINT NOT NULL, body BYTEA NOT NULL, delivered BOOLEAN NOT NULL DEFAULT false, PRIMARY KEY (endpoint, user_id));
CREATE INDEX IF NOT EXISTS presence_webhook_rows_owner ON presence_webhook_rows (endpoint, owner, delivered, shard, at_ms);`

// Hooks is the store's webhook rows (store.HookStore) in the same
// database: the table is made at the first call.
func (s *Postgres) Hooks(ctx context.Context) (store.HookStore, error) {
	if _, err := s.pool.Exec(ctx, hooksSchema); err != nil {
		return nil, err
	}
	return pgHooks{s}, nil
}

type pgHooks struct{ s *Postgres }

func (h pgHooks) PutHooks(ctx context.Context, rows []store.HookRow) error {
	b := &pgx.Batch{}
	for _, r := range rows {
		b.Queue(`INSERT INTO presence_webhook_rows (endpoint, user_id, version, owner, shard, at_ms, body) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (endpoint, user_id) DO UPDATE SET version = excluded.version, owner = excluded.owner, shard = excluded.shard, at_ms = excluded.at_ms, body = excluded.body, delivered = false
		WHERE excluded.version > presence_webhook_rows.version`, r.Endpoint, r.User, int64(r.Version), r.Owner, r.Shard, r.AtMs, r.Body)
	}
	return h.inTx(ctx, b)
}

// inTx sends a batch of statements in one transaction, as one pipeline.
func (h pgHooks) inTx(ctx context.Context, b *pgx.Batch) error {
	return pgx.BeginFunc(ctx, h.s.pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
}

func (h pgHooks) PendingHooks(ctx context.Context, endpoint, owner string, shards []int, limit int) ([]store.HookRow, error) {
	sh := make([]int32, len(shards))
	for i, s := range shards {
		sh[i] = int32(s)
	}
	rows, err := h.s.pool.Query(ctx, `SELECT user_id, version, shard, at_ms, body FROM presence_webhook_rows
	WHERE endpoint = $1 AND owner = $2 AND NOT delivered AND shard = ANY($3) ORDER BY at_ms, user_id LIMIT $4`, endpoint, owner, sh, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.HookRow, error) {
		h := store.HookRow{Endpoint: endpoint, Owner: owner}
		var v int64
		var shard int32
		err := r.Scan(&h.User, &v, &shard, &h.AtMs, &h.Body)
		h.Version, h.Shard = uint64(v), int(shard)
		return h, err
	})
}

func (h pgHooks) DoneHooks(ctx context.Context, endpoint string, done []store.HookKey) error {
	b := &pgx.Batch{}
	for _, d := range done {
		q := `DELETE FROM presence_webhook_rows WHERE endpoint = $1 AND user_id = $2 AND version <= $3`
		if d.Keep {
			q = `UPDATE presence_webhook_rows SET delivered = true WHERE endpoint = $1 AND user_id = $2 AND version <= $3`
		}
		b.Queue(q, endpoint, d.User, int64(d.Version))
	}
	return h.inTx(ctx, b)
}

func (h pgHooks) OrphanHooks(ctx context.Context, endpoint string, alive []string, limit int) ([]store.HookRow, error) {
	return h.rows(ctx, endpoint, `SELECT user_id, version, owner, shard, at_ms, body, delivered FROM presence_webhook_rows
	WHERE endpoint = $1 AND NOT (owner = ANY($2)) LIMIT $3`, endpoint, alive, limit)
}

func (h pgHooks) OwnedHooks(ctx context.Context, endpoint, owner, after string, limit int) ([]store.HookRow, error) {
	return h.rows(ctx, endpoint, `SELECT user_id, version, owner, shard, at_ms, body, delivered FROM presence_webhook_rows
	WHERE endpoint = $1 AND owner = $2 AND user_id > $3 ORDER BY user_id LIMIT $4`, endpoint, owner, after, limit)
}

// rows reads whole rows of endpoint: user, version, owner, shard, at_ms,
// body, delivered.
func (h pgHooks) rows(ctx context.Context, endpoint, q string, args ...any) ([]store.HookRow, error) {
	rows, err := h.s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.HookRow, error) {
		h := store.HookRow{Endpoint: endpoint}
		var v int64
		var shard int32
		err := r.Scan(&h.User, &v, &h.Owner, &shard, &h.AtMs, &h.Body, &h.Delivered)
		h.Version, h.Shard = uint64(v), int(shard)
		return h, err
	})
}

func (h pgHooks) ClaimHooks(ctx context.Context, endpoint, from, to string, users []string) error {
	_, err := h.s.pool.Exec(ctx, `UPDATE presence_webhook_rows SET owner = $1 WHERE endpoint = $2 AND owner = $3 AND user_id = ANY($4)`, to, endpoint, from, users)
	return err
}

func (h pgHooks) CountHooks(ctx context.Context, endpoint, owner string) (int, error) {
	var n int
	err := h.s.pool.QueryRow(ctx, `SELECT count(*) FROM presence_webhook_rows WHERE endpoint = $1 AND NOT delivered AND ($2 = '' OR owner = $2)`, endpoint, owner).Scan(&n)
	return n, err
}
