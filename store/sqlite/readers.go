package sqlite

import (
	"context"
	"sync"

	"github.com/presence-im/presence/store"
)

// readers run the store's reads (a policy, a floor, a last seen) on a few
// long-lived goroutines, the caller waiting for its answer. A read through
// the pure-Go SQLite needs a deep stack; run on the asking actor's
// goroutine, which proto.actor starts afresh, with a small stack, each time
// the actor's mailbox wakes, it grew that stack by copying it again and
// again (runtime.copystack and stackalloc under the views' and leases'
// activation reads: 7.5% of the node's CPU while devices connected,
// BENCHMARKS.md, connect rate). A reader's stack grows once.
//
// There is one reader fewer than the handle's connections, so a read
// never takes the last one from the writer's commit.
type readers struct {
	q    chan func()
	quit chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func startReaders(n int) *readers {
	r := &readers{q: make(chan func()), quit: make(chan struct{})}
	for range n {
		r.wg.Go(r.loop)
	}
	return r
}

func (r *readers) loop() {
	for {
		select {
		case f := <-r.q:
			f()
		case <-r.quit:
			return
		}
	}
}

// do runs f on a reader and waits for it; a closed store or ctx ending
// before a reader took it answers with their error, and f does not run.
func (r *readers) do(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case r.q <- func() { defer close(done); f() }:
	case <-r.quit:
		return store.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	<-done
	return nil
}

// stop ends the readers once the reads they run are done.
func (r *readers) stop() {
	r.once.Do(func() { close(r.quit) })
	r.wg.Wait()
}
