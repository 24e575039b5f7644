package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presence-im/presence/store/sqlite"
)

// BenchmarkHistoryWrites: many handshakes and departures at once, as in a
// mass connect or drop: 64 writers per core raise a floor, then set a
// last-seen; ns/op is per pair of writes.
func BenchmarkHistoryWrites(b *testing.B) {
	inParallel(b, 64, func(ctx context.Context, s *sqlite.SQLite, n int64) error {
		user := fmt.Sprintf("u%07d", n)
		if err := s.RaiseFloor(ctx, user, "phone", 1); err != nil {
			return err
		}
		return s.SetLastSeen(ctx, user, time.Now())
	})
}

// BenchmarkTakeFloor: a connect storm's floors, each device's first (the
// write a cold handshake waits for), from 1 and 64 writers per core (small
// and large commits); ns/op is per floor.
//
//	go test -run '^$' -bench TakeFloor -count 6 ./store/sqlite/
func BenchmarkTakeFloor(b *testing.B) {
	for _, par := range []int{1, 64} {
		b.Run(fmt.Sprint("writers=", par, "xcores"), func(b *testing.B) {
			inParallel(b, par, func(ctx context.Context, s *sqlite.SQLite, n int64) error {
				t, err := s.TakeFloor(ctx, fmt.Sprintf("bench%06d", n%100_000), fmt.Sprint("d", n/100_000), 1)
				if err == nil && !t.OK {
					err = fmt.Errorf("take refused: %+v", t)
				}
				return err
			})
		})
	}
}

// inParallel runs op on a new store from par writers per core, n counting
// the calls from 1; the first error stops its writer.
func inParallel(b *testing.B, par int, op func(ctx context.Context, s *sqlite.SQLite, n int64) error) {
	s, err := sqlite.Open(filepath.Join(b.TempDir(), "presence.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(par)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(ctx, s, next.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
