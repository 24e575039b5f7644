package actors

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
)

type nopSocket struct{}

func (nopSocket) Send(*messages.Frame) bool        { return true }
func (nopSocket) Close(messages.CloseCode, string) {}

// BenchmarkHeapPerDevice reports the heap one online device costs a node's
// actors (its connActor, leaseActor and viewActor, timers and
// directory entries), without any socket: b.N devices of b.N users.
func BenchmarkHeapPerDevice(b *testing.B) {
	n, err := Start(Deps{NodeID: "n1", Timing: config.Seed(), Seed: 1, Policies: store.NewMemoryPolicies(), History: store.NewMemoryHistory()})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Stop()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := range b.N {
		user := fmt.Sprintf("u%07d", i)
		if _, err := n.Gateway().Open(context.Background(), OpenRequest{User: user, Device: "d", Attempt: 1, ConnID: "c" + user, Socket: nopSocket{}}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	time.Sleep(100 * time.Millisecond) // let the DeviceUps reach the views
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(b.N), "heap-B/device")
	b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
}
