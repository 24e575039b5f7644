package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/messages"
)

// ErrStopped is returned by requests to a stopped node.
var ErrStopped = errors.New("actors: node stopped")

// LocalDirectory activates lease and view actors in one actor system.
//
// Passivation without losing messages: every Send and Request happens under
// the directory's lock and counts the message against the target; an actor
// may stop only when, under the same lock, it has handled as many directory
// messages as were sent to it. Anything sent later activates a new actor.
type LocalDirectory struct {
	root  *actor.RootContext
	spawn func(Kind, string) *actor.PID

	mu      sync.Mutex
	entries map[Kind]map[string]*entry
	stopped bool
}

type entry struct {
	pid  *actor.PID
	sent uint64
	// view is a view actor's own state, attached when it starts: a lookup
	// reads it instead of asking the actor when that gives the same answer
	// (readView). nil: ask the actor.
	view *viewActor
}

// NewLocalDirectory makes a directory; spawn starts the actor of an
// identity.
func NewLocalDirectory(root *actor.RootContext, spawn func(Kind, string) *actor.PID) *LocalDirectory {
	return &LocalDirectory{root: root, spawn: spawn, entries: map[Kind]map[string]*entry{KindLease: {}, KindView: {}}}
}

// get returns the entry of an identity, spawning its actor. Callers hold mu.
func (d *LocalDirectory) get(kind Kind, id string) *entry {
	e, ok := d.entries[kind][id]
	if !ok {
		pid := d.spawn(kind, id)
		e = &entry{pid: pid}
		d.entries[kind][id] = e
	}
	e.sent++
	return e
}

func (d *LocalDirectory) Send(kind Kind, id string, msg any) { d.deliver(kind, id, msg, nil) }

// deliver sends msg to the actor of an identity with sender as its sender
// (nil: none), counted like Send: the directory host hands on a message
// from another member this way, so the actor answers the original asker.
// Once stopped, an asker gets a dead letter at once (its future fails, as
// a local Request gets ErrStopped).
func (d *LocalDirectory) deliver(kind Kind, id string, msg any, sender *actor.PID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		if sender != nil {
			d.root.Send(sender, &actor.DeadLetterResponse{})
		}
		return
	}
	pid := d.get(kind, id).pid
	if sender == nil {
		d.root.Send(pid, msg)
		return
	}
	d.root.RequestWithCustomSender(pid, msg, sender)
}

func (d *LocalDirectory) Request(ctx context.Context, kind Kind, id string, msg any) (any, error) {
	timeout := requestTimeout(ctx)
	if timeout <= 0 {
		return nil, fmt.Errorf("actors: %s %s: %w", kind, id, context.DeadlineExceeded)
	}
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return nil, ErrStopped
	}
	f := d.root.RequestFuture(d.get(kind, id).pid, msg, timeout)
	d.mu.Unlock()
	res, err := f.Result()
	if err != nil {
		return nil, fmt.Errorf("actors: %s %s: %w", kind, id, err)
	}
	return res, nil
}

// attachView lets lookups of user read the state of view actor self
// (readView) while it is the user's actor here.
func (d *LocalDirectory) attachView(user string, self *actor.PID, a *viewActor) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.entries[KindView][user]; ok && e.pid.Equal(self) {
		e.view = a
	}
}

// readView answers a lookup of user from its active view's state, without
// a message to it, when that is what a ViewQuery would be answered
// (viewActor.read): under the directory's lock, so every message sent to
// the view before it was handled. false: ask the actor (Node.Query).
//
// A view that has not read the store yet (activated by its devices'
// connects) is read here, on the lookup's goroutine and outside the lock,
// not in the view's mailbox: the view keeps what was read if nothing was
// sent to it meanwhile. A policy is written before its PolicyChanged is
// sent, so a change written after this read was sent before the hand-over
// (which is then refused, and the view reads the store itself) or comes
// after it (and the loaded view reads the new policy).
func (d *LocalDirectory) readView(ctx context.Context, user string) (*messages.ViewState, bool) {
	d.mu.Lock()
	e, ok := d.entries[KindView][user]
	if d.stopped || !ok || e.view == nil {
		d.mu.Unlock()
		return nil, false
	}
	view, sent := e.view, e.sent
	st, ans := view.read(sent, time.Now(), nil)
	d.mu.Unlock()
	if ans != readLoad {
		return st, ans == readDone
	}
	pol, last, err := view.env.readStore(ctx, user)
	if err != nil {
		return nil, false // the view reads it, and notes the failure (armReread)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped || d.entries[KindView][user] != e || e.view != view || e.sent != sent {
		return nil, false
	}
	st, ans = view.read(sent, time.Now(), &viewLoad{pol, last})
	return st, ans == readDone
}

func (d *LocalDirectory) Passivate(kind Kind, id string, self *actor.PID, received uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.entries[kind][id]
	if !ok || !e.pid.Equal(self) || e.sent != received {
		return false
	}
	delete(d.entries[kind], id)
	return true
}

func (d *LocalDirectory) Forget(kind Kind, id string, self *actor.PID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.entries[kind][id]; ok && e.pid.Equal(self) {
		delete(d.entries[kind], id)
	}
}

// stopMoved stops the actors whose identity keep says this node no longer
// holds (its owner changed with the topology), as proto.actor poisons a
// grain that moved. Each handles what was sent to it before it stops (a
// poison pill queues behind them); a later message activates a new actor.
// keep runs outside the lock.
func (d *LocalDirectory) stopMoved(keep func(Kind, string) bool) int {
	type live struct {
		kind Kind
		id   string
		pid  *actor.PID
	}
	var all []live
	d.mu.Lock()
	for kind, m := range d.entries {
		for id, e := range m {
			all = append(all, live{kind, id, e.pid})
		}
	}
	d.mu.Unlock()
	moved := slices.DeleteFunc(all, func(l live) bool { return keep(l.kind, l.id) })
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, l := range moved {
		if e, ok := d.entries[l.kind][l.id]; ok && e.pid.Equal(l.pid) {
			delete(d.entries[l.kind], l.id)
			d.root.Poison(l.pid)
			n++
		}
	}
	return n
}

// Owns is always true: a LocalDirectory is alone.
func (d *LocalDirectory) Owns(Kind, string) bool { return true }

func (d *LocalDirectory) Count(kind Kind) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.entries[kind])
}

func (d *LocalDirectory) Stop() {
	d.mu.Lock()
	d.stopped = true
	var futures []*actor.Future
	for _, m := range d.entries {
		for id, e := range m {
			// Poison, not Stop: a stop is a system message, handled
			// before the mailbox's queued messages, which it dropped.
			futures = append(futures, d.root.PoisonFuture(e.pid))
			delete(m, id)
		}
	}
	d.mu.Unlock()
	for _, f := range futures {
		_ = f.Wait()
	}
}
