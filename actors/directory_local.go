package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
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
	props func(Kind, string) *actor.Props

	mu      sync.Mutex
	entries map[Kind]map[string]*entry
	stopped bool
}

type entry struct {
	pid  *actor.PID
	sent uint64
}

// NewLocalDirectory makes a directory; props returns the props of the actor
// for an identity.
func NewLocalDirectory(root *actor.RootContext, props func(Kind, string) *actor.Props) *LocalDirectory {
	return &LocalDirectory{root: root, props: props, entries: map[Kind]map[string]*entry{KindLease: {}, KindView: {}}}
}

// get returns the entry of an identity, spawning its actor. Callers hold mu.
func (d *LocalDirectory) get(kind Kind, id string) *entry {
	e, ok := d.entries[kind][id]
	if !ok {
		pid := d.root.Spawn(d.props(kind, id))
		e = &entry{pid: pid}
		d.entries[kind][id] = e
	}
	e.sent++
	return e
}

func (d *LocalDirectory) Send(kind Kind, id string, msg any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	d.root.Send(d.get(kind, id).pid, msg)
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
			futures = append(futures, d.root.StopFuture(e.pid))
			delete(m, id)
		}
	}
	d.mu.Unlock()
	for _, f := range futures {
		_ = f.Wait()
	}
}
