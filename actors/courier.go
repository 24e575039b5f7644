package actors

import (
	"context"
	"sync"
	"time"
)

// courier carries the messages of connection and gateway actors to lease
// and view actors off their mailboxes. Reaching an identity can wait on
// another member: ClusterDirectory asks the identity's owner to activate
// it, and an owner that died but is not yet declared dead holds that call
// for proto.actor's request timeout (5 s). A connection must go on reading
// heartbeats and checking staleness meanwhile, and its renewals must go on
// reaching a lease that lives elsewhere (docs/architecture.md, "Off the
// mailbox").
//
// Messages to a lease go each on a goroutine of its own: epoch fencing
// makes their order irrelevant (core.Lease: a renewal or re-register that
// arrives after its connection's release is refused), and a re-register
// must not wait behind a renewal stuck on a member that died since. A
// connection has at most timeout/renew of them stuck at once. Messages to a
// view keep their order (a subscribe before its unsubscribe, the last show
// last): one lane per view identity, drained by one goroutine while it has
// work, none while it is idle. Safe for concurrent use.
type courier struct {
	dir Directory

	mu    sync.Mutex
	lanes map[string][]func() // per view identity, the sends waiting
	busy  sync.WaitGroup      // goroutines carrying something
}

func newCourier(dir Directory) *courier {
	return &courier{dir: dir, lanes: map[string][]func(){}}
}

// send sends msg to the identity without waiting for the directory.
func (c *courier) send(kind Kind, id string, msg any) {
	if kind == KindLease {
		c.busy.Go(func() { c.dir.Send(kind, id, msg) })
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q, running := c.lanes[id]
	c.lanes[id] = append(q, func() { c.dir.Send(kind, id, msg) })
	if !running {
		c.busy.Go(func() { c.drain(id) })
	}
}

// drain sends a view's waiting messages in order until its lane is empty.
func (c *courier) drain(id string) {
	for {
		c.mu.Lock()
		q := c.lanes[id]
		if len(q) == 0 {
			delete(c.lanes, id)
			c.mu.Unlock()
			return
		}
		c.lanes[id] = q[1:]
		c.mu.Unlock()
		q[0]()
	}
}

// request asks a lease for an answer within timeout, off the caller's
// mailbox, and hands the answer (or the error) to reply, on the courier's
// goroutine: reply only sends it back to the asking actor as a message.
func (c *courier) request(kind Kind, id string, msg any, timeout time.Duration, reply func(any, error)) {
	c.busy.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		reply(c.dir.Request(ctx, kind, id, msg))
	})
}

// wait returns once everything handed to the courier was carried (each
// call returns within the directory's timeouts).
func (c *courier) wait() { c.busy.Wait() }
