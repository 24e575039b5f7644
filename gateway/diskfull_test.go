package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/store"
	"github.com/presence-im/presence/store/sqlite"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// smallDisk mounts a 1 MiB tmpfs on a temporary directory (as root; the
// test is skipped otherwise): a real file system that fills up.
func smallDisk(t *testing.T) string {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("no tmpfs to fill (root only): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fill takes the free space of dir's file system; the returned func
// frees it.
func fill(t *testing.T, dir string) func() {
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			break // ENOSPC: full
		}
	}
	f.Close()
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// syncBuffer is a log's output read by the test while the node writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), substr)
}

// A node on SQLite whose disk fills up: the device online stays online,
// new handshakes are refused 503 with Retry-After, each counted, and the
// log says so once for the burst, not once per handshake; once there is
// room again a handshake is accepted and the log says the burst ended.
func TestSQLiteOnAFullDisk(t *testing.T) {
	dir := smallDisk(t)
	db, err := sqlite.Open(filepath.Join(dir, "presence.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() }) // before the umount
	var out syncBuffer
	m := store.NewStoreMetrics(nil)
	m.Health = store.NewHealth(slog.New(slog.NewTextHandler(&out, nil)), nil)
	nd := startNode(t, func(_ *Options, d *actors.Deps) {
		m.Wait = d.Timing.HandshakeWait()
		d.History = m.InstrumentHistory(db)
	})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	alice := nd.dial("alice", "phone", 1)
	nd.keepAlive(ctx, alice)

	free := fill(t, dir)
	const tries = 5
	for attempt := uint64(1); attempt <= tries; attempt++ {
		_, err := client.Dial(ctx, nd.url(), client.DialOptions{Token: nd.token("bob", "phone"), Attempt: attempt})
		var he *client.HandshakeError
		if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || he.RetryAfter <= 0 {
			t.Fatalf("handshake %d on a full disk: %v, want 503 with Retry-After", attempt, err)
		}
	}
	time.Sleep(2 * nd.timing.TTL) // alice's lease renewed past its TTL on a full disk
	if devs := nd.route("alice"); len(devs) != 1 {
		t.Fatalf("alice's devices %v on a full disk, want her phone online", devs)
	}
	// bob's lease never read its floor: each handshake takes it (one
	// write that reads the floor too, store.FloorTaker)
	if n := testutil.ToFloat64(m.Errors.WithLabelValues("take_floor")); n != tries {
		t.Fatalf("presence_store_errors_total{take_floor} %v, want %d", n, tries)
	}
	if n, all := out.lines("take_floor failing"), out.lines("level=ERROR"); n != 1 || all != 1 {
		t.Fatalf("%d lines saying take_floor fails, %d errors, for one burst of %d: want 1 and 1:\n%s", n, all, tries, out.b.String())
	}

	free()
	nd.dial("bob", "phone", tries+1)
	if n := out.lines(`take_floor works again" failures=5`); n != 1 {
		t.Fatalf("the burst's end logged %d times, want once with its count:\n%s", n, out.b.String())
	}
}
