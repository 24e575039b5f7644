package gateway

import (
	"fmt"
	"testing"

	"github.com/presence-im/presence/messages"
)

// BenchmarkPresenceSend is the gateway's share of one offline to 5,000
// subscribers on one node: each subscriber's socket queues the same
// read-only Presence the view sent them all (actors.route). The sockets
// are not upgraded, so the frame stops in the socket's early queue: this is
// the encoding and queueing, without nbio's copy and the kernel's write.
func BenchmarkPresenceSend(b *testing.B) {
	for _, c := range []codec{jsonCodec, binaryCodec} {
		b.Run(c.name, func(b *testing.B) {
			srv := &Server{opt: DefaultOptions()}
			socks := make([]*socket, 5000)
			for i := range socks {
				socks[i] = &socket{s: srv, codec: c}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				p := &messages.Presence{User: fmt.Sprintf("bench%06d", i%1000), Status: messages.Status_offline, Version: uint64(1_700_000_000_000 + i), LastSeenMinute: 29_000_000}
				f := &messages.Frame{Kind: &messages.Frame_Presence{Presence: p}}
				for _, s := range socks {
					if !s.Send(f) {
						b.Fatal("outbox full")
					}
					s.early = s.early[:0]
				}
			}
		})
	}
}
