package actors

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// BenchmarkMassClose opens conns devices, then closes them all at once and
// waits until the gateway has forgotten every one: the cost of a mass
// disconnect, per connection (ns/op is per device). Each Terminated used to
// scan every connection (O(N^2) for N closes); now it is a map lookup.
func BenchmarkMassClose(b *testing.B) {
	for _, conns := range []int{2000, 8000} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				n, err := Start(Deps{NodeID: "n1", Timing: config.Seed(), Seed: 1, Policies: store.NewMemoryPolicies(), History: store.NewMemoryHistory()})
				if err != nil {
					b.Fatal(err)
				}
				open := make([]*Conn, conns)
				for i := range open {
					user := fmt.Sprintf("u%07d", i)
					if open[i], err = n.Gateway().Open(context.Background(), OpenRequest{User: user, Device: "d", Attempt: 1, ConnID: "c" + user, Socket: nopSocket{}}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				for _, c := range open {
					c.Closed()
				}
				deadline := time.Now().Add(time.Minute)
				for n.Gateway().conns.Load() > 0 {
					if time.Now().After(deadline) {
						b.Fatalf("%d connections still known after a minute", n.Gateway().conns.Load())
					}
					time.Sleep(time.Millisecond)
				}
				b.StopTimer()
				n.Stop()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*conns), "ns/close")
		})
	}
}

// BenchmarkCheckPeriod: one staleness check period of a gateway holding
// 10,000 live connections (ns/op is per period, measured on the gateway
// until it has sent what it sends; each message sent also costs the
// connection actor that receives it, reported as checks/period).
func BenchmarkCheckPeriod(b *testing.B) {
	const conns = 10000
	n, err := Start(Deps{NodeID: "n1", Timing: config.Seed(), Seed: 1, Policies: store.NewMemoryPolicies(), History: store.NewMemoryHistory()})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Stop()
	g := n.Gateway()
	for i := range conns {
		user := fmt.Sprintf("u%07d", i)
		if _, err := g.Open(context.Background(), OpenRequest{User: user, Device: "d", Attempt: 1, ConnID: "c" + user, Socket: nopSocket{}}); err != nil {
			b.Fatal(err)
		}
	}
	before := testutil.ToFloat64(n.metrics.StaleChecks)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		n.root.Send(g.pid, checkTick{})
		// The gateway answers in mailbox order: after the tick.
		barrier := OpenRequest{ConnID: fmt.Sprintf("barrier%d", i), Socket: nopSocket{}, since: time.Now()}
		if _, err := n.root.RequestFuture(g.pid, spawnConn{barrier}, 10*time.Second).Result(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric((testutil.ToFloat64(n.metrics.StaleChecks)-before)/float64(b.N), "checks/period")
}
