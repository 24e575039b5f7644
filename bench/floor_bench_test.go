package bench

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// BenchmarkFanoutFloor is what one message to each of --subs loopback
// sockets costs this machine with nothing of a presence system in it: no
// WebSocket, no JSON, no actors; one writer per core as the node's fan-out
// has (actors.sinkHub), a goroutine blocked in Read per receiver, all in
// one process. Its p99 is a floor under any server's "one offline to 5,000
// subscribers" here (BENCHMARKS.md, "What limits each figure"): each
// delivery is a write system call, which on loopback also runs the
// receiver's TCP path and wakes it, and a read.
//
//	go test -run '^$' -bench FanoutFloor -benchtime 5x -count 3 ./bench/
func BenchmarkFanoutFloor(b *testing.B) {
	const subs, writers, size = 5000, 2, 64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	servers, clients := make([]net.Conn, subs), make([]net.Conn, subs)
	for i := range subs {
		if clients[i], err = net.Dial("tcp", ln.Addr().String()); err != nil {
			b.Fatal(err)
		}
		if servers[i], err = ln.Accept(); err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		for i := range subs {
			servers[i].Close()
			clients[i].Close()
		}
	}()
	got := make(chan time.Time, subs)
	for _, c := range clients {
		go func() {
			buf := make([]byte, size)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				got <- time.Now()
			}
		}()
	}
	msg := make([]byte, size)
	var p50, p99, last []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := w; i < subs; i += writers {
					if _, err := servers[i].Write(msg); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		lat := make([]time.Duration, subs)
		for i := range subs {
			lat[i] = (<-got).Sub(start)
		}
		wg.Wait()
		p50, p99, last = append(p50, quantile(lat, 0.5)), append(p99, quantile(lat, 0.99)), append(last, quantile(lat, 1))
	}
	b.StopTimer()
	ms := func(d []time.Duration) float64 { return float64(quantile(d, 0.5).Microseconds()) / 1000 } // the median event
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(last), "max-ms")
}
