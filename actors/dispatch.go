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
// mailbox run before it ends (ants' purge, which looks this often: an
// idle worker goes after 10 to 20 s): long enough to span the gaps
// between one connect, fan-out or lease burst and the next, short enough
// that the goroutines of a burst do not outlive it by much.
const workerIdle = 10 * time.Second

// pooledDispatcher runs the node's mailboxes on the goroutines of an ants
// pool instead of a new goroutine each time a mailbox gets a message while
// idle (proto.actor's default dispatcher). Handling a message goes deep
// (a handshake's lease through the store, a view's fan-out), past the
// stack a new goroutine starts with, which the runtime then grew by
// copying: 5.5% of the node's CPU in a connect storm (BENCHMARKS.md,
// connect rate). A pooled worker keeps the stack it grew for the next
// runs, until a collection finds it idle and shrinks it. The pool has no
// cap: a mailbox run may block (a lease waits for its floor's commit), and
// one waiting for a free worker could wait on itself.
type pooledDispatcher struct{ pool *ants.Pool }

func newPooledDispatcher(log *slog.Logger) (pooledDispatcher, error) {
	p, err := ants.NewPool(-1, ants.WithExpiryDuration(workerIdle), ants.WithLogger(antsLogger{log}),
		ants.WithPanicHandler(func(p any) { panic(p) })) // past the mailbox's recover: crash, as on a goroutine of its own
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
// to a second for runs still going (a run that outlasts it keeps its
// worker until it ends; said at warn).
func (d pooledDispatcher) release(log *slog.Logger) {
	if err := d.pool.ReleaseTimeout(time.Second); err != nil {
		log.Warn("mailbox pool: runs still going a second after the node stopped", "running", d.pool.Running(), "err", err)
	}
}

// antsLogger sends what ants logs to the node's log.
type antsLogger struct{ log *slog.Logger }

func (l antsLogger) Printf(format string, args ...any) {
	l.log.Error("mailbox pool: " + fmt.Sprintf(format, args...))
}

var _ actor.Dispatcher = pooledDispatcher{}
