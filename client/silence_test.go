package client_test

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/gateway"
)

// freezer forwards TCP connections to a node until frozen; then it drops
// whatever either side sends and closes nothing, as a host that lost
// power or a killed container looks from the device.
type freezer struct {
	ln     net.Listener
	frozen atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newFreezer(t *testing.T, to string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln}
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, up)
			f.mu.Unlock()
			f.wg.Go(func() { f.pipe(up, c) })
			f.wg.Go(func() { f.pipe(c, up) })
		}
	})
	t.Cleanup(f.close)
	return f
}

func (f *freezer) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 4096)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if !f.frozen.Load() {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
}

func (f *freezer) close() {
	f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// A node that goes silent without closing (nothing acked, no close) is
// left after Silence for the next URL.
func TestSessionLeavesASilentNode(t *testing.T) {
	a, b := startNode(t, "a", gateway.Options{}), startNode(t, "b", gateway.Options{})
	proxy := newFreezer(t, a.srv.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	s := client.Start(ctx, client.Config{URLs: []string{"ws://" + proxy.ln.Addr().String() + "/ws", b.url()}, Token: token(t, "alice", "phone"),
		Silence: time.Second})
	defer func() { cancel(); <-s.Done() }()
	waitFor(t, 2*time.Second, "on a", func() bool { return s.Hello().GetNode() == "a" })
	time.Sleep(1500 * time.Millisecond) // acked heartbeats (every 300 ms) keep it there
	if s.Hello().GetNode() != "a" || s.Connections() != 1 {
		t.Fatalf("left a live node: on %q after %d connections", s.Hello().GetNode(), s.Connections())
	}
	proxy.frozen.Store(true)
	waitFor(t, 5*time.Second, "moved to b", func() bool { return s.Hello().GetNode() == "b" })
}
