package actors

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Mailbox runs one after another reuse one worker (the stack it grew), and
// the workers of a burst end once idle for workerIdle: the pool holds
// goroutines for what runs, not for what ran.
func TestPooledDispatcherReusesThenEndsIdleWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := newPooledDispatcher(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer d.release(slog.New(slog.DiscardHandler))
		var ran atomic.Int32
		for range 5 {
			d.Schedule(func() { ran.Add(1) })
			synctest.Wait()
		}
		if ran.Load() != 5 || d.pool.Running() != 1 {
			t.Fatalf("%d runs on %d workers, want 5 on 1", ran.Load(), d.pool.Running())
		}
		release := make(chan struct{})
		for range 50 {
			d.Schedule(func() { <-release })
		}
		synctest.Wait()
		if n := d.pool.Running(); n != 50 {
			t.Fatalf("%d workers for 50 blocked runs, want 50", n)
		}
		close(release)
		time.Sleep(2 * workerIdle)
		synctest.Wait()
		if n := d.pool.Running(); n != 0 {
			t.Fatalf("%d workers left %v after the burst, want 0", n, 2*workerIdle)
		}
	})
}

// The pool has no cap: with many runs blocked (leases waiting for their
// commits), another mailbox still runs at once instead of waiting for a
// free worker, which could be waiting on it. Real time, not a bubble: a
// Schedule waiting for a worker waits on a sync.Cond, which synctest does
// not count as blocked, so the bubble would hang instead of failing; the
// timeout is only reached when it fails.
func TestPooledDispatcherRunsPastBlockedRuns(t *testing.T) {
	d, err := newPooledDispatcher(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		for range 5000 {
			d.Schedule(func() { <-release })
		}
		d.Schedule(func() { close(done) })
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("a run waited behind 5,000 blocked ones")
	}
	close(release)
	d.release(slog.New(slog.DiscardHandler))
}

// Once the node's pool is released (the node stopping), a mailbox still
// runs, on a goroutine of its own: a late message is not dropped.
func TestPooledDispatcherAfterRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := newPooledDispatcher(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		d.release(slog.New(slog.DiscardHandler))
		done := make(chan struct{})
		d.Schedule(func() { close(done) })
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("a run scheduled after release did not run")
		}
	})
}
