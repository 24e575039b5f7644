package bench

import (
	"io"
	"net"
	"slices"
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
	var p50, p99, last []float64
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
		lat := make([]float64, subs)
		for i := range subs {
			lat[i] = float64((<-got).Sub(start).Microseconds()) / 1000
		}
		wg.Wait()
		slices.Sort(lat)
		p50, p99, last = append(p50, lat[subs/2]), append(p99, lat[subs*99/100]), append(last, lat[subs-1])
	}
	b.StopTimer()
	b.ReportMetric(median(p50), "p50-ms")
	b.ReportMetric(median(p99), "p99-ms")
	b.ReportMetric(median(last), "max-ms")
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}
