package actors

import (
	"context"
	"sync"
	"time"
)

// courier carries the messages of connection and gateway actors to lease
// and view actors off their mailboxes. A connection must go on reading
// heartbeats and checking staleness whatever the directory does: a request
// (a re-register's) waits for its answer, and a directory that asked an
// identity's owner to activate it before sending (as this one's did, until
// it sent to the owner's directory host) held even a send for proto.actor's
// 5 s request timeout when that owner had died but was not yet declared
// dead (docs/architecture.md, "Off the mailbox").
//
// Messages to a lease go each on a goroutine of its own: epoch fencing
// makes their order irrelevant (core.Lease: a renewal or re-register that
// arrives after its connection's release is refused), and a re-register
// must not wait behind a renewal stuck on a member that died since. A
// connection has at most timeout/renew of them stuck at once. Messages to a
// view keep their order (a subscribe before its unsubscribe, the last show
// last): one lane per view identity and owner (by the placement when it
// was sent), drained by one goroutine while it has work, none while idle.
// A lane stuck on an owner that died holds only what was sent to that
// owner, lost anyway; what is sent once the placement moved the identity
// goes into a new lane. Safe for concurrent use.
type courier struct {
	n *Node // its directory and placement, read at each send

	mu     sync.Mutex
	lanes  map[string][]func() // per view identity and owner, the sends waiting
	active int                 // goroutines carrying something
	idle   sync.Cond           // signalled when active drops to 0
}

func newCourier(n *Node) *courier {
	c := &courier{n: n, lanes: map[string][]func(){}}
	c.idle.L = &c.mu
	return c
}

// carry runs f on a goroutine of its own, counted for wait. Callers
// hold mu.
func (c *courier) carry(f func()) {
	c.active++
	go func() {
		defer func() {
			c.mu.Lock()
			if c.active--; c.active == 0 {
				c.idle.Broadcast()
			}
			c.mu.Unlock()
		}()
		f()
	}()
}

// send sends msg to the identity without waiting for the directory.
func (c *courier) send(kind Kind, id string, msg any) {
	dir := c.n.dir
	key := id
	if p := c.n.members; p != nil && kind == KindView {
		key += "@" + p.Owner(string(kind), id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if kind == KindLease {
		c.carry(func() { dir.Send(kind, id, msg) })
		return
	}
	q, running := c.lanes[key]
	c.lanes[key] = append(q, func() { dir.Send(kind, id, msg) })
	if !running {
		c.carry(func() { c.drain(key) })
	}
}

// drain sends a lane's waiting messages in order until it is empty.
func (c *courier) drain(key string) {
	for {
		c.mu.Lock()
		q := c.lanes[key]
		if len(q) == 0 {
			delete(c.lanes, key)
			c.mu.Unlock()
			return
		}
		c.lanes[key] = q[1:]
		c.mu.Unlock()
		q[0]()
	}
}

// request asks a lease for an answer within timeout, off the caller's
// mailbox, and hands the answer (or the error) to reply, on the courier's
// goroutine: reply only sends it back to the asking actor as a message.
func (c *courier) request(kind Kind, id string, msg any, timeout time.Duration, reply func(any, error)) {
	dir := c.n.dir
	c.mu.Lock()
	defer c.mu.Unlock()
	c.carry(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		reply(dir.Request(ctx, kind, id, msg))
	})
}

// wait returns once everything handed to the courier was carried (each
// call returns within the directory's timeouts).
func (c *courier) wait() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.active > 0 {
		c.idle.Wait()
	}
}
