package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A full queue refuses at once with ErrQueueFull, and what it refused is
// never written; what it took is committed, grouped.
func TestBatcherQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		var committed []Write
		var batches []int
		b := NewBatcher("test", func(_ context.Context, ws []Write) error {
			<-release
			mu.Lock()
			committed = append(committed, ws...)
			batches = append(batches, len(ws))
			mu.Unlock()
			return nil
		}, 3, 0)
		ctx := context.Background()
		errs := make(chan error, 10)
		do := func(user string) { errs <- b.Do(ctx, Write{User: user, Device: "d", Attempt: 1}) }
		go do("first") // taken by the writer, whose commit blocks
		synctest.Wait()
		for _, u := range []string{"q1", "q2", "q3"} { // fill the queue of 3
			go do(u)
		}
		synctest.Wait()
		if err := b.Do(ctx, Write{User: "refused", Device: "d", Attempt: 1}); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("a write on a full queue: %v, want ErrQueueFull", err)
		}
		close(release)
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatalf("a queued write: %v", err)
			}
		}
		b.Close()
		if len(committed) != 4 || len(batches) != 2 || batches[1] != 3 {
			t.Fatalf("committed %v in batches %v, want 4 writes: 1 then the 3 queued in one", committed, batches)
		}
		for _, w := range committed {
			if w.User == "refused" {
				t.Fatal("the refused write was committed")
			}
		}
		if w, r := testutil.ToFloat64(b.written), testutil.ToFloat64(b.refused); w != 4 || r != 1 {
			t.Fatalf("metrics: written %v refused %v, want 4 and 1", w, r)
		}
		if err := b.Do(ctx, Write{User: "late"}); !errors.Is(err, ErrClosed) {
			t.Fatalf("a write after Close: %v, want ErrClosed", err)
		}
	})
}

// A failed commit fails every floor of its batch, and counts them.
func TestBatcherCommitFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("disk full")
		b := NewBatcher("test", func(context.Context, []Write) error { return boom }, 0, 0)
		defer b.Close()
		if err := b.Do(context.Background(), Write{User: "u", Device: "d", Attempt: 1}); !errors.Is(err, boom) {
			t.Fatalf("write: %v, want the commit's error", err)
		}
		if f, w := testutil.ToFloat64(b.failed), testutil.ToFloat64(b.written); f != 1 || w != 0 {
			t.Fatalf("metrics: failed %v written %v, want 1 and 0", f, w)
		}
	})
}

// A last seen that finds the queue full is kept, the latest per user, and
// written after the queue: none is lost (a mass disconnect), Do does not
// wait for it, and Close writes what is still kept.
func TestBatcherKeepsLastSeensOnAFullQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		written := map[string]time.Time{}
		var batches []int
		b := NewBatcher("test", func(_ context.Context, ws []Write) error {
			<-release
			mu.Lock()
			defer mu.Unlock()
			for _, w := range ws {
				if w.Device == "" && w.At.After(written[w.User]) {
					written[w.User] = w.At
				}
			}
			batches = append(batches, len(ws))
			return nil
		}, 2, 3)
		ctx := context.Background()
		t0 := time.Now()
		go func() { _ = b.Do(ctx, Write{User: "first", At: t0}) }() // its commit blocks
		synctest.Wait()
		for _, u := range []string{"q1", "q2"} { // the queue of 2 is full
			go func() { _ = b.Do(ctx, Write{User: u, At: t0}) }()
		}
		synctest.Wait()
		want := map[string]time.Time{"first": t0, "q1": t0, "q2": t0}
		for i := range 7 { // kept at once, not waited for
			u := fmt.Sprintf("u%d", i%5)
			at := t0.Add(time.Duration(i) * time.Second)
			if err := b.Do(ctx, Write{User: u, At: at}); err != nil {
				t.Fatalf("a last seen on a full queue: %v", err)
			}
			want[u] = at
		}
		if err := b.Do(ctx, Write{User: "f", Device: "d", Attempt: 1}); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("a floor on a full queue: %v, want ErrQueueFull", err)
		}
		close(release)
		synctest.Wait()
		b.Close()
		if len(written) != len(want) {
			t.Fatalf("written %v, want %v", written, want)
		}
		for u, at := range want {
			if !written[u].Equal(at) {
				t.Errorf("%s: last seen %v, want %v", u, written[u], at)
			}
		}
		for _, n := range batches {
			if n > 3 {
				t.Fatalf("batches %v: one over the 3 allowed", batches)
			}
		}
		if d, r := testutil.ToFloat64(b.deferred), testutil.ToFloat64(b.refused); d != 7 || r != 1 {
			t.Fatalf("deferred %v refused %v, want 7 and 1", d, r)
		}
		if len(b.seen) != 0 {
			t.Fatalf("%d last seens still kept", len(b.seen))
		}
	})
}

// A write is answered only once the transaction holding it committed: a
// floor is durable before its handshake is answered.
func TestBatcherAnswersAfterItsCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		b := NewBatcher("test", func(context.Context, []Write) error { <-release; return nil }, 0, 0)
		defer b.Close()
		done := make(chan error, 1)
		go func() { done <- b.RaiseFloor(context.Background(), "alice", "phone", 3) }()
		synctest.Wait()
		select {
		case err := <-done:
			close(release)
			t.Fatalf("RaiseFloor returned (%v) while its commit was still running", err)
		default:
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestStoreDownKeepsLastSeens: while the store fails, a floor fails (its
// handshake is refused) but a last seen is kept, the latest per user,
// retried RetryEvery apart and written once the store answers again: none
// lost, each counted while it waits. A Close while the store still fails
// gives up what is kept, and counts it.
func TestStoreDownKeepsLastSeens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("connection refused")
		var mu sync.Mutex
		down, tries := true, 0
		stored := map[string]time.Time{}
		b := NewBatcher("test", func(_ context.Context, ws []Write) error {
			mu.Lock()
			defer mu.Unlock()
			tries++
			if down {
				return boom
			}
			for _, w := range ws {
				if w.Device == "" && w.At.After(stored[w.User]) {
					stored[w.User] = w.At
				}
			}
			return nil
		}, 0, 0)
		defer b.Close()
		ctx := context.Background()
		t0 := time.Now()
		if err := b.Do(ctx, Write{User: "u", Device: "d", Attempt: 1}); !errors.Is(err, boom) {
			t.Fatalf("a floor with the store down: %v, want its error", err)
		}
		for i, u := range []string{"ann", "bob", "ann"} {
			if err := b.Do(ctx, Write{User: u, At: t0.Add(time.Duration(i) * time.Second)}); err != nil {
				t.Fatalf("a last seen with the store down: %v, want it kept", err)
			}
		}
		if p := testutil.ToFloat64(b.pending); p != 2 {
			t.Fatalf("pending %v with the store down, want 2 (one per user)", p)
		}
		time.Sleep(10 * RetryEvery)
		synctest.Wait()
		mu.Lock()
		if tries > 4+10 {
			t.Fatalf("%d commits in %v with the store down: the retries do not wait", tries, 10*RetryEvery)
		}
		down = false
		mu.Unlock()
		time.Sleep(RetryEvery)
		synctest.Wait()
		mu.Lock()
		got := map[string]time.Time{"ann": stored["ann"], "bob": stored["bob"]}
		mu.Unlock()
		if !got["ann"].Equal(t0.Add(2*time.Second)) || !got["bob"].Equal(t0.Add(time.Second)) {
			t.Fatalf("stored %v after the store came back, want ann's latest and bob's", got)
		}
		if p, k := testutil.ToFloat64(b.pending), testutil.ToFloat64(b.kept); p != 0 || k != 3 {
			t.Fatalf("pending %v kept %v after the store came back, want 0 and 3 (each write once)", p, k)
		}
		mu.Lock()
		down = true
		mu.Unlock()
		if err := b.Do(ctx, Write{User: "cy", At: t0}); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if l := testutil.ToFloat64(b.lost); l != 1 {
			t.Fatalf("lost %v after a Close with the store down, want 1", l)
		}
	})
}

// TestKeepDoesNotWaitForTheStore: Keep hands a last seen to the writer
// and returns at once while every commit fails; the writer keeps it (one
// per user, counted once however often it is retried) and writes it once
// the store answers. After Close it is refused and counted.
func TestKeepDoesNotWaitForTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		down, tries := true, 0
		stored := map[string]time.Time{}
		b := NewBatcher("test", func(_ context.Context, ws []Write) error {
			mu.Lock()
			defer mu.Unlock()
			tries++
			if down {
				return errors.New("connection refused")
			}
			for _, w := range ws {
				stored[w.User] = w.At
			}
			return nil
		}, 0, 0)
		defer b.Close()
		t0 := time.Now()
		for i := range 3 {
			if err := b.Keep(Write{User: "ann", At: t0.Add(time.Duration(i) * time.Millisecond)}); err != nil {
				t.Fatal(err)
			}
		}
		if time.Since(t0) != 0 {
			t.Fatalf("Keep waited %v", time.Since(t0))
		}
		time.Sleep(5 * RetryEvery)
		synctest.Wait()
		mu.Lock()
		n := tries
		down = false
		mu.Unlock()
		if p, k := testutil.ToFloat64(b.pending), testutil.ToFloat64(b.kept); n < 2 || p != 1 || k != 1 {
			t.Fatalf("%d commits, pending %v, kept %v with the store down: want retries, 1 and 1", n, p, k)
		}
		time.Sleep(RetryEvery)
		synctest.Wait()
		mu.Lock()
		got := stored["ann"]
		mu.Unlock()
		if !got.Equal(t0.Add(2*time.Millisecond)) || testutil.ToFloat64(b.pending) != 0 {
			t.Fatalf("stored %v, pending %v once the store answers, want her latest and 0", got, testutil.ToFloat64(b.pending))
		}
		b.Close()
		if err := b.Keep(Write{User: "bob", At: t0}); !errors.Is(err, ErrClosed) || testutil.ToFloat64(b.refused) != 1 {
			t.Fatalf("Keep after Close: %v, refused %v", err, testutil.ToFloat64(b.refused))
		}
	})
}
