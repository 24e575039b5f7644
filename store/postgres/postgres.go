// Package postgres is the store of presence for clusters on several hosts:
// privacy policies, attempt floors and last-seen times in PostgreSQL.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/presence-im/presence/store"
)

// Postgres is a store.PolicyStore and store.HistoryStore in PostgreSQL, for clusters
// whose nodes are on several hosts (--policy-dsn postgres://...). Safe for
// concurrent use.
type Postgres struct {
	pool *pgxpool.Pool
}

const postgresSchema = `
CREATE TABLE IF NOT EXISTS presence_policies (user_id TEXT PRIMARY KEY, doc JSONB NOT NULL, updated_ms BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS presence_floors (user_id TEXT NOT NULL, device TEXT NOT NULL, attempt BIGINT NOT NULL, PRIMARY KEY (user_id, device));
CREATE TABLE IF NOT EXISTS presence_last_seen (user_id TEXT PRIMARY KEY, at_ms BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS presence_leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, token BIGINT NOT NULL, expiry_ms BIGINT NOT NULL);
`

// Open connects to dsn and creates the tables if needed.
func Open(ctx context.Context, dsn string) (*Postgres, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: %w", err)
	}
	if _, err := pool.Exec(ctx, postgresSchema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: postgres: schema: %w", err)
	}
	return &Postgres{pool: pool}, nil
}

// Close closes the pool.
func (s *Postgres) Close() { s.pool.Close() }

func (s *Postgres) Get(ctx context.Context, user string) (store.PolicyDoc, bool, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT doc FROM presence_policies WHERE user_id = $1`, user).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.PolicyDoc{}, false, nil
	}
	return store.DecodePolicy(user, raw, err)
}

func (s *Postgres) Put(ctx context.Context, user string, d store.PolicyDoc) error {
	raw, err := store.EncodePolicy(user, d)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO presence_policies (user_id, doc, updated_ms) VALUES ($1, $2, $3)
		ON CONFLICT (user_id) DO UPDATE SET doc = EXCLUDED.doc, updated_ms = EXCLUDED.updated_ms`,
		user, raw, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("store: put policy of %s: %w", user, err)
	}
	return nil
}

func (s *Postgres) Floor(ctx context.Context, user, device string) (uint64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT attempt FROM presence_floors WHERE user_id = $1 AND device = $2`, user, device).Scan(&n)
	return store.ReadFloor(user, device, n, errors.Is(err, pgx.ErrNoRows), err)
}

func (s *Postgres) RaiseFloor(ctx context.Context, user, device string, attempt uint64) error {
	if err := store.CheckAttempt(user, device, attempt); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO presence_floors (user_id, device, attempt) VALUES ($1, $2, $3)
		ON CONFLICT (user_id, device) DO UPDATE SET attempt = GREATEST(presence_floors.attempt, EXCLUDED.attempt)`,
		user, device, int64(attempt))
	if err != nil {
		return fmt.Errorf("store: raise floor of %s/%s: %w", user, device, err)
	}
	return nil
}

func (s *Postgres) LastSeen(ctx context.Context, user string) (time.Time, error) {
	var ms int64
	err := s.pool.QueryRow(ctx, `SELECT at_ms FROM presence_last_seen WHERE user_id = $1`, user).Scan(&ms)
	return store.ReadLastSeen(user, ms, errors.Is(err, pgx.ErrNoRows), err)
}

func (s *Postgres) SetLastSeen(ctx context.Context, user string, t time.Time) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO presence_last_seen (user_id, at_ms) VALUES ($1, $2)
		ON CONFLICT (user_id) DO UPDATE SET at_ms = GREATEST(presence_last_seen.at_ms, EXCLUDED.at_ms)`, user, t.UnixMilli())
	if err != nil {
		return fmt.Errorf("store: set last seen of %s: %w", user, err)
	}
	return nil
}

// TakeLease is one compare-and-set upsert: the row changes only when it is
// the holder's or expired (the row lock orders concurrent takers).
func (s *Postgres) TakeLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (store.Lease, error) {
	if err := store.CheckLease(name, holder, ttl); err != nil {
		return store.Lease{}, err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO presence_leases (name, holder, token, expiry_ms) VALUES ($1, $2, 1, $3)
		ON CONFLICT (name) DO UPDATE SET
			token = CASE WHEN presence_leases.holder = EXCLUDED.holder THEN presence_leases.token ELSE presence_leases.token + 1 END,
			holder = EXCLUDED.holder, expiry_ms = EXCLUDED.expiry_ms
		WHERE presence_leases.holder = EXCLUDED.holder OR presence_leases.expiry_ms <= $4`,
		name, holder, now.Add(ttl).UnixMilli(), now.UnixMilli())
	if err != nil {
		return store.Lease{}, fmt.Errorf("store: take lease %s: %w", name, err)
	}
	l := store.Lease{Name: name}
	var token, exp int64
	err = s.pool.QueryRow(ctx, `SELECT holder, token, expiry_ms FROM presence_leases WHERE name = $1`, name).Scan(&l.Holder, &token, &exp)
	if err != nil {
		return store.Lease{}, fmt.Errorf("store: read lease %s: %w", name, err)
	}
	l.Token, l.Expiry = uint64(token), time.UnixMilli(exp)
	return l, nil
}
