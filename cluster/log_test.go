package cluster

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"
)

// counter is a slog handler that keeps the warnings and errors it gets.
type counter struct {
	mu      sync.Mutex
	records []slog.Record
}

func (c *counter) Enabled(context.Context, slog.Level) bool { return true }
func (c *counter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		c.mu.Lock()
		c.records = append(c.records, r)
		c.mu.Unlock()
	}
	return nil
}
func (c *counter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *counter) WithGroup(string) slog.Handler      { return c }

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.records)
}

// A burst of garbage on the gossip port, UDP and TCP, logs one line, not
// one per packet; the first line after the burst window says how many
// were left out.
func TestGossipGarbageLogsOncePerBurst(t *testing.T) {
	logs := &counter{}
	g, err := NewGossip(GossipConfig{Name: "n1", Bind: "127.0.0.1:0", Preset: "fast", Key: []byte("0123456789abcdef"), Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown()
	w := g.conf.Logger.Writer().(*memberlistLog)
	udp, err := net.Dial("udp", g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	const packets = 200
	for range packets {
		_, _ = udp.Write([]byte("garbage that decrypts to nothing"))
	}
	for range 5 {
		if c, err := net.Dial("tcp", g.Addr()); err == nil {
			_, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
			_ = c.Close()
		}
	}
	// Loopback UDP may drop some under load: most is enough to show it.
	waitUntil(t, 10*time.Second, "most garbage seen by memberlist", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.suppressed >= packets/2
	})
	if n := logs.count(); n != 1 {
		t.Fatalf("%d warning or error lines for a burst of garbage, want 1", n)
	}

	// After the window, the next line carries the count. That line may be
	// a late garbage packet memberlist is still reading rather than ours:
	// either is admitted once and carries what was left out, so wait for
	// the second line instead of assuming it is ours.
	now := time.Now().Add(LogBurst + time.Second)
	w.mu.Lock()
	w.now = func() time.Time { return now }
	left := w.suppressed
	w.mu.Unlock()
	_, _ = w.Write([]byte("[ERR] memberlist: one more"))
	waitUntil(t, 10*time.Second, "a line after the window", func() bool { return logs.count() >= 2 })
	if n := logs.count(); n != 2 {
		t.Fatalf("%d lines after the window, want 2 (one admitted per window)", n)
	}
	logs.mu.Lock()
	r := logs.records[1]
	logs.mu.Unlock()
	got := -1
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed" {
			got = int(a.Value.Int64())
		}
		return true
	})
	if got < left {
		t.Fatalf("suppressed = %d, want at least the %d left out before", got, left)
	}
}
