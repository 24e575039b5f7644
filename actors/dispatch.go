package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/panjf2000/ants/v2"
)

// mailboxThroughput is how many messages a mailbox handles before it
// yields its goroutine: proto.actor's default dispatcher's.
const mailboxThroughput = 300

// workerIdle is how long a worker of the node's pool waits for another
// mailbox run before it ends (ants' purge): long enough to span the gaps
// between one connect, fan-out or lease burst and the next, short enough
// that the goroutines of a burst do not outlive it by much.
const workerIdle = 10 * time.Second

// pooledDispatcher runs the node's mailboxes on the goroutines of an ants
// pool instead of a new goroutine each time a mailbox gets a message while
// idle (proto.actor's default dispatcher). Handling a message goes deep
// (a handshake's lease through the store, a view's fan-out), far past the
// 8 KiB a new goroutine starts with: each such run grew its stack, copying
// it twice or three times, 8% of the node's CPU in a connect storm and 10%
// in a fan-out (BENCHMARKS.md, connect rate). A pooled worker keeps the
// stack it grew for the next run. The pool has no cap: a mailbox run may
// block (a lease waits for its floor's commit), and one waiting for a free
// worker could wait on itself.
type pooledDispatcher struct{ pool *ants.Pool }

func newPooledDispatcher(log *slog.Logger) (pooledDispatcher, error) {
	p, err := ants.NewPool(-1, ants.WithExpiryDuration(workerIdle), ants.WithLogger(antsLogger{log}))
	if err != nil {
		return pooledDispatcher{}, fmt.Errorf("actors: mailbox pool: %w", err)
	}
	return pooledDispatcher{p}, nil
}

// Schedule runs fn on a pooled worker, or on a goroutine of its own once
// the pool is released (the node stopping: late messages are still
// handled, as proto.actor would).
func (d pooledDispatcher) Schedule(fn func()) {
	if d.pool.Submit(fn) != nil {
		go fn()
	}
}

func (pooledDispatcher) Throughput() int { return mailboxThroughput }

// release ends the pool's idle workers and its purge goroutines, waiting up
// to a second for runs still going: a stopped node leaves no goroutine.
func (d pooledDispatcher) release() { _ = d.pool.ReleaseTimeout(time.Second) }

// antsLogger sends what ants logs (a run that panicked past the mailbox's
// own recover) to the node's log.
type antsLogger struct{ log *slog.Logger }

func (l antsLogger) Printf(format string, args ...any) {
	l.log.Error("mailbox pool: " + fmt.Sprintf(format, args...))
}

var _ actor.Dispatcher = pooledDispatcher{}
