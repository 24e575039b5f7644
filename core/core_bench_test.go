package core_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// BenchmarkLeaseRenew is the hot path of the lease layer: one renewal.
func BenchmarkLeaseRenew(b *testing.B) {
	h := &messages.Holder{Node: "g1", ConnId: "c1", Epoch: 1}
	var l core.Lease
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.Acquire(h, true, now, 150*time.Second)
	b.ReportAllocs()
	for i := range b.N {
		l.Renew(h, now.Add(time.Duration(i)*time.Second), 150*time.Second)
	}
}

// BenchmarkViewFanout publishes one show change to 1000 exact subscribers.
func BenchmarkViewFanout(b *testing.B) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := &core.Policy{Granularity: core.Exact, Contacts: map[string]bool{}}
	for i := range 1000 {
		pol.Contacts[fmt.Sprintf("v%d", i)] = true
	}
	v := core.NewView("alice", 20*time.Second, pol, time.Time{})
	for i := range 1000 {
		v.Subscribe(fmt.Sprintf("s%d", i), fmt.Sprintf("v%d", i), now)
	}
	v.DeviceUp("phone", &messages.Holder{Node: "g1", ConnId: "c1", Epoch: 1}, now)
	shows := []messages.Show{messages.Show_away, messages.Show_dnd}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if res := v.SetShow(shows[i%2], now.Add(time.Duration(i)*time.Millisecond)); len(res.Deliveries) != 1000 {
			b.Fatalf("%d deliveries", len(res.Deliveries))
		}
	}
}
