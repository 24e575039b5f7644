//go:build !race

// Two proto.actor members share this process (see provider_test.go).

package cluster

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkRemoteRequest: one request and its answer from a member to a
// virtual actor on the other member, over the plaintext remote (no cluster
// key) and over mutual TLS (with one): what the TLS costs per round trip.
func BenchmarkRemoteRequest(b *testing.B) {
	for _, bc := range []struct {
		name string
		key  []byte
	}{{"plain", nil}, {"mtls", []byte("0123456789abcdef0123456789abcdef")}} {
		b.Run(bc.name, func(b *testing.B) {
			a := startMember(b, "n1", bc.key)
			o := startMember(b, "n2", bc.key, a.p.Gossip().Addr())
			defer func() {
				o.p.Gossip().Shutdown()
				o.c.Shutdown(false)
				a.p.Gossip().Shutdown()
				a.c.Shutdown(false)
			}()
			id := ""
			deadline := time.Now().Add(10 * time.Second)
			for id == "" && time.Now().Before(deadline) {
				for i := range 50 {
					if got, err := a.ask(fmt.Sprintf("u%d", i)); err == nil && got == fmt.Sprintf("u%d@n2", i) {
						id = fmt.Sprintf("u%d", i)
						break
					}
				}
			}
			if id == "" {
				b.Fatal("no identity answered by n2")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := a.ask(id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
