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
	s, err := sqlite.Open(filepath.Join(b.TempDir(), "presence.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			user := fmt.Sprintf("u%07d", next.Add(1))
			if err := s.RaiseFloor(ctx, user, "phone", 1); err != nil {
				b.Error(err)
				return
			}
			if err := s.SetLastSeen(ctx, user, time.Now()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkTakeFloor: a connect storm's floors, each device's first (the
// write a cold handshake waits for), from 1 and 64 writers per core (small
// and large commits); ns/op is per floor.
//
//	go test -run '^$' -bench TakeFloor -count 6 ./store/sqlite/
func BenchmarkTakeFloor(b *testing.B) {
	for _, par := range []int{1, 64} {
		b.Run(fmt.Sprint("writers=", par, "xcores"), func(b *testing.B) { takeFloors(b, par) })
	}
}

func takeFloors(b *testing.B, par int) {
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
			n := next.Add(1)
			if t, err := s.TakeFloor(ctx, fmt.Sprintf("bench%06d", n%100_000), fmt.Sprint("d", n/100_000), 1); err != nil || !t.OK {
				b.Errorf("take: %+v %v", t, err)
				return
			}
		}
	})
}
