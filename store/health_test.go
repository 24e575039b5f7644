package store

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A store that fails for three minutes, through a thousand refused
// handshakes, is four lines: its start with the error, a sum once a
// minute, and its end with the count; the gauge is 1 in between. Another
// operation's burst is its own.
func TestHealthLogsABurstOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		h := NewHealth(slog.New(slog.NewTextHandler(&out, nil)), nil)
		down := errors.New("disk full")
		h.note("raise_floor", nil)
		if out.Len() != 0 || h.Failing() {
			t.Fatalf("a success logged %q, failing %v", out.String(), h.Failing())
		}
		for range 3 {
			for range 333 {
				h.note("raise_floor", down)
				time.Sleep(180 * time.Millisecond) // 333 a minute
			}
		}
		h.note("raise_floor", down) // the thousandth
		if got := testutil.ToFloat64(h.failing.WithLabelValues("raise_floor")); got != 1 || !h.Failing() {
			t.Fatalf("presence_store_failing{raise_floor} %v, Failing %v during the burst", got, h.Failing())
		}
		h.note("raise_floor", nil)
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 4 {
			t.Fatalf("%d lines for one burst, want 4:\n%s", len(lines), out.String())
		}
		for i, want := range []string{"raise_floor failing", "still failing", "still failing", "works again"} {
			if !strings.Contains(lines[i], want) {
				t.Errorf("line %d %q, want %q", i, lines[i], want)
			}
		}
		if !strings.Contains(lines[0], "disk full") || !strings.Contains(lines[3], "failures=1000") {
			t.Errorf("the start without its error or the end without its count:\n%s", out.String())
		}
		if got := testutil.ToFloat64(h.failing.WithLabelValues("raise_floor")); got != 0 || h.Failing() {
			t.Fatalf("presence_store_failing{raise_floor} %v, Failing %v after the burst", got, h.Failing())
		}
		out.Reset()
		h.note("set_last_seen", down)
		h.note("raise_floor", down)
		if n := strings.Count(out.String(), "\n"); n != 2 {
			t.Fatalf("two operations' bursts: %d lines, want 2:\n%s", n, out.String())
		}
	})
}

// TestStoreHealthEndsWithItsKind: a read that works ends every read's
// burst (a floor, read only when a lease actor starts, would otherwise
// say the store fails long after it is back), not a write's (a read-only
// disk still fails its writes).
func TestStoreHealthEndsWithItsKind(t *testing.T) {
	var out bytes.Buffer
	h := NewHealth(slog.New(slog.NewTextHandler(&out, nil)), nil)
	down := errors.New("connection refused")
	h.note("floor", down)
	h.note("raise_floor", down)
	h.note("view_load", nil)
	if got := testutil.ToFloat64(h.failing.WithLabelValues("floor")); got != 0 {
		t.Fatalf("presence_store_failing{floor} %v after a read worked, want 0:\n%s", got, out.String())
	}
	if got := testutil.ToFloat64(h.failing.WithLabelValues("raise_floor")); got != 1 || !h.Failing() {
		t.Fatalf("presence_store_failing{raise_floor} %v after a read worked, want 1 (writes still fail)", got)
	}
	if !strings.Contains(out.String(), "store: floor works again") {
		t.Fatalf("the floor's burst ended without a line:\n%s", out.String())
	}
	h.note("set_last_seen", nil)
	if h.Failing() {
		t.Fatal("still failing after a write worked")
	}
}
