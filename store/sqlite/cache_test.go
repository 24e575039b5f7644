package sqlite

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every connection of the pool has the bounded page cache, not SQLite's
// default: the pragma rides on the DSN, so a connection opened later (the
// pool grows under load) gets it too.
func TestEveryConnectionHasTheBoundedPageCache(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "presence.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var held []interface{ Close() error }
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := range MaxConns {
		c, err := s.db.Conn(ctx) // each held: the next is a new connection
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		var kib int
		if err := c.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&kib); err != nil {
			t.Fatal(err)
		}
		if kib != -CacheKiB {
			t.Fatalf("connection %d: cache_size %d, want %d (KiB)", i+1, kib, -CacheKiB)
		}
	}
}

// BenchmarkViewLoadPageCache: view loads of random users from a file of
// 100,000 (as the churn benchmark writes), from 8 goroutines over the
// pool, with SQLite's default page cache and with CacheKiB; reports the
// process's anonymous memory the loads left (RssAnon, /proc/self/status,
// after Go's heap is collected), which is where SQLite's cache lives.
//
//	go test -run '^$' -bench ViewLoadPageCache -benchtime 100000x -count 3 ./store/sqlite/
func BenchmarkViewLoadPageCache(b *testing.B) {
	path := filepath.Join(b.TempDir(), "presence.db")
	const users = 100_000
	fill(b, path, users)
	for _, kib := range []int{2000, CacheKiB} {
		b.Run(fmt.Sprintf("cache=%dKiB", kib), func(b *testing.B) {
			s, err := open(path, kib)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			before := rssAnon(b)
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N/8 + 1
			for w := range 8 {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(w), 1))
					for range per {
						if _, _, _, err := s.LoadView(ctx, fmt.Sprintf("c%06d", r.IntN(users))); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(rssAnon(b)-before)/(1<<20), "anon-MiB")
		})
	}
}

// fill writes n users' policies and last-seen times in one transaction.
func fill(b *testing.B, path string, n int) {
	s, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tx, err := s.db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for i := range n {
		u := fmt.Sprintf("c%06d", i)
		doc := fmt.Sprintf(`{"granularity":"exact","contacts":["c%06d","c%06d","c%06d","c%06d"]}`, (i+1)%n, (i+2)%n, (i+3)%n, (i+4)%n)
		if _, err := tx.Exec(`INSERT INTO policies (user, doc, updated_ms) VALUES (?, ?, ?)`, u, doc, now); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO last_seen (user, at_ms) VALUES (?, ?)`, u, now); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// rssAnon is the process's anonymous resident memory, in bytes.
func rssAnon(b *testing.B) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Skip("no RssAnon")
	return 0
}
