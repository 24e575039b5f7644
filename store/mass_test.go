package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// massDevices connect (a floor each) and disconnect (a last-seen each) at
// once: a mass connect and drop.
const massDevices = 3000

// A mass connect and disconnect through the store loses no write: every
// floor and last-seen is in the database afterwards, every write was
// counted as written, none failed, and the batched stores grouped them.
func TestMassConnectDisconnect(t *testing.T) {
	for name, open := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
			user := func(i int) string { return fmt.Sprintf("u%05d", i) }
			var wg sync.WaitGroup
			for i := range massDevices {
				wg.Go(func() {
					if err := s.RaiseFloor(ctx, user(i), "phone", uint64(i+1)); err != nil {
						t.Errorf("connect %d: %v", i, err)
					}
					if err := s.SetLastSeen(ctx, user(i), t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
						t.Errorf("disconnect %d: %v", i, err)
					}
				})
			}
			wg.Wait()
			lost := 0
			for i := range massDevices {
				f, err1 := s.Floor(ctx, user(i), "phone")
				at, err2 := s.LastSeen(ctx, user(i))
				if f != uint64(i+1) || !at.Equal(t0.Add(time.Duration(i)*time.Millisecond)) || err1 != nil || err2 != nil {
					lost++
				}
			}
			if lost > 0 {
				t.Fatalf("%d of %d devices lost a write", lost, massDevices)
			}
			c, ok := s.(interface{ Collectors() []prometheus.Collector })
			if name != "memory" && !ok {
				t.Fatalf("%s: no write metrics", name)
			}
			if ok {
				checkWriteMetrics(t, c.Collectors())
			}
		})
	}
}

// checkWriteMetrics: 2 writes per device written, none failed or refused,
// in fewer transactions than writes.
func checkWriteMetrics(t *testing.T, cs []prometheus.Collector) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(cs...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			got[mf.GetName()] = m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			got[mf.GetName()] = float64(m.GetHistogram().GetSampleCount())
		}
	}
	want := float64(2 * massDevices)
	if got["presence_store_writes_total"] != want || got["presence_store_write_failures_total"] != 0 || got["presence_store_writes_refused_total"] != 0 {
		t.Fatalf("write metrics %v, want %v written, none failed or refused", got, want)
	}
	commits := got["presence_store_batch_writes"]
	if commits < 1 || commits >= want {
		t.Fatalf("%v commits for %v writes: not grouped", commits, want)
	}
	t.Logf("%v writes in %v transactions", want, commits)
}
