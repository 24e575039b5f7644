// Package postgres is the store of presence for clusters on several hosts:
// privacy policies, attempt floors and last-seen times in PostgreSQL.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Postgres is a store.PolicyStore and store.HistoryStore in PostgreSQL, for clusters
// whose nodes are on several hosts (--policy-dsn postgres://...). Safe for
// concurrent use.
type Postgres struct {
	pool *pgxpool.Pool
	w    *store.Batcher // the one writer of floors and last-seen times
}

// DefaultMaxConns bounds the pool unless the DSN sets pool_max_conns.
const DefaultMaxConns = 8

const postgresSchema = `
CREATE TABLE IF NOT EXISTS presence_policies (user_id TEXT PRIMARY KEY, doc JSONB NOT NULL, updated_ms BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS presence_floors (user_id TEXT NOT NULL, device TEXT NOT NULL, attempt BIGINT NOT NULL, PRIMARY KEY (user_id, device));
CREATE TABLE IF NOT EXISTS presence_last_seen (user_id TEXT PRIMARY KEY, at_ms BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS presence_leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, token BIGINT NOT NULL, expiry_ms BIGINT NOT NULL);
`

// Open connects to dsn and creates the tables if needed.
func Open(ctx context.Context, dsn string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: %w", err)
	}
	if _, err := pool.Exec(ctx, postgresSchema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: postgres: schema: %w", err)
	}
	s := &Postgres{pool: pool}
	s.w = store.NewBatcher("postgres", s.commit, 0, 0)
	return s, nil
}

// Close commits the queued writes and closes the pool.
func (s *Postgres) Close() {
	s.w.Close()
	s.pool.Close()
}

// Collectors are the writer's metrics.
func (s *Postgres) Collectors() []prometheus.Collector { return s.w.Collectors() }

// commit writes a batch of floors and last-seen times in one transaction,
// sent as one pipeline.
func (s *Postgres) commit(ctx context.Context, ws []store.Write) error {
	var b pgx.Batch
	for _, w := range ws {
		if w.Take != nil { // a row changes only if the attempt is written
			b.Queue(`INSERT INTO presence_floors (user_id, device, attempt) VALUES ($1, $2, $3)
		ON CONFLICT (user_id, device) DO UPDATE SET attempt = EXCLUDED.attempt WHERE EXCLUDED.attempt > presence_floors.attempt`,
				w.User, w.Device, int64(w.Attempt))
		} else if w.Device != "" {
			b.Queue(`INSERT INTO presence_floors (user_id, device, attempt) VALUES ($1, $2, $3)
		ON CONFLICT (user_id, device) DO UPDATE SET attempt = GREATEST(presence_floors.attempt, EXCLUDED.attempt)`, w.User, w.Device, int64(w.Attempt))
		} else {
			b.Queue(`INSERT INTO presence_last_seen (user_id, at_ms) VALUES ($1, $2)
		ON CONFLICT (user_id) DO UPDATE SET at_ms = GREATEST(presence_last_seen.at_ms, EXCLUDED.at_ms)`, w.User, w.At.UnixMilli())
		}
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		br := tx.SendBatch(ctx, &b)
		var stood []store.Write // taken floors not written: read the floor that stands
		for _, w := range ws {
			var err error
			if w.Take != nil {
				var tag pgconn.CommandTag
				if tag, err = br.Exec(); err == nil && tag.RowsAffected() == 1 {
					*w.Take = store.Taken{OK: true}
				} else if err == nil {
					stood = append(stood, w)
				}
			} else {
				_, err = br.Exec()
			}
			if err != nil {
				br.Close()
				return err
			}
		}
		if err := br.Close(); err != nil {
			return err
		}
		for _, w := range stood {
			var n int64
			if err := tx.QueryRow(ctx, `SELECT attempt FROM presence_floors WHERE user_id = $1 AND device = $2`, w.User, w.Device).Scan(&n); err != nil {
				return err
			}
			*w.Take = store.Taken{Floor: uint64(n)}
		}
		return nil
	})
}

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

// TakeFloor makes attempt the floor if it is above, through the writer's
// batch (store.FloorTaker).
func (s *Postgres) TakeFloor(ctx context.Context, user, device string, attempt uint64) (store.Taken, error) {
	return s.w.TakeFloor(ctx, user, device, attempt)
}

func (s *Postgres) RaiseFloor(ctx context.Context, user, device string, attempt uint64) error {
	return s.w.RaiseFloor(ctx, user, device, attempt)
}

func (s *Postgres) LastSeen(ctx context.Context, user string) (time.Time, error) {
	var ms int64
	err := s.pool.QueryRow(ctx, `SELECT at_ms FROM presence_last_seen WHERE user_id = $1`, user).Scan(&ms)
	return store.ReadLastSeen(user, ms, errors.Is(err, pgx.ErrNoRows), err)
}

func (s *Postgres) SetLastSeen(ctx context.Context, user string, t time.Time) error {
	err := s.w.Do(ctx, store.Write{User: user, At: t})
	if err != nil {
		return fmt.Errorf("store: set last seen of %s: %w", user, err)
	}
	return nil
}

// KeepLastSeen hands t to the writer without waiting for its commit
// (store.LastSeenKeeper).
func (s *Postgres) KeepLastSeen(user string, t time.Time) error {
	if err := s.w.Keep(store.Write{User: user, At: t}); err != nil {
		return fmt.Errorf("store: keep last seen of %s: %w", user, err)
	}
	return nil
}

// ArbiterClock is the database server's clock.
func (s *Postgres) ArbiterClock(ctx context.Context) (time.Time, error) {
	var us int64
	if err := s.pool.QueryRow(ctx, `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`).Scan(&us); err != nil {
		return time.Time{}, fmt.Errorf("store: arbiter clock: %w", err)
	}
	return time.UnixMicro(us), nil
}

// TakeArbiter is one compare-and-set upsert: the row changes only when it is
// the holder's or expired (the row lock orders concurrent takers). The
// table keeps its first name, presence_leases, so existing databases need
// no migration.
func (s *Postgres) TakeArbiter(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (store.Arbiter, error) {
	if err := store.CheckArbiter(name, holder, ttl); err != nil {
		return store.Arbiter{}, err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO presence_leases (name, holder, token, expiry_ms) VALUES ($1, $2, 1, $3)
		ON CONFLICT (name) DO UPDATE SET
			token = CASE WHEN presence_leases.holder = EXCLUDED.holder THEN presence_leases.token ELSE presence_leases.token + 1 END,
			holder = EXCLUDED.holder, expiry_ms = EXCLUDED.expiry_ms
		WHERE presence_leases.holder = EXCLUDED.holder OR presence_leases.expiry_ms <= $4`,
		name, holder, now.Add(ttl).UnixMilli(), now.UnixMilli())
	if err != nil {
		return store.Arbiter{}, fmt.Errorf("store: take arbiter %s: %w", name, err)
	}
	l := store.Arbiter{Name: name}
	var token, exp int64
	err = s.pool.QueryRow(ctx, `SELECT holder, token, expiry_ms FROM presence_leases WHERE name = $1`, name).Scan(&l.Holder, &token, &exp)
	if err != nil {
		return store.Arbiter{}, fmt.Errorf("store: read arbiter %s: %w", name, err)
	}
	l.Token, l.Expiry = uint64(token), time.UnixMilli(exp)
	return l, nil
}
