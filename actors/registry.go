package actors

import (
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/btree"
)

// registry indexes one kind of a node's live actors by key (identity),
// in order, so that the inspector pages over them without listing them
// all: a page costs O(log n + limit). Its memory follows the live actors
// (an entry from activation to stop). Safe for concurrent use.
type registry struct {
	mu sync.Mutex
	t  *btree.BTreeG[regEntry]
}

// regEntry is one live actor; two actors of one identity on a node (a
// leftover of an earlier topology beside the new one) are two entries,
// ordered by process id.
type regEntry struct {
	key string
	pid *actor.PID
}

func regLess(a, b regEntry) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return a.pid.GetId() < b.pid.GetId()
}

func newRegistry() *registry { return &registry{t: btree.NewG(32, regLess)} }

func (r *registry) add(key string, pid *actor.PID) {
	r.mu.Lock()
	r.t.ReplaceOrInsert(regEntry{key, pid})
	r.mu.Unlock()
}

func (r *registry) remove(key string, pid *actor.PID) {
	r.mu.Lock()
	r.t.Delete(regEntry{key, pid})
	r.mu.Unlock()
}

// pids returns the pid of every live actor of the kind: a copy, so that
// the caller may send to them, or stop them, without holding the lock.
func (r *registry) pids() []*actor.PID {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*actor.PID, 0, r.t.Len())
	r.t.Ascend(func(e regEntry) bool {
		out = append(out, e.pid)
		return true
	})
	return out
}

func (r *registry) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.t.Len()
}

// page returns up to limit entries whose key starts with prefix, after
// the cursor (cursorOf of the last entry of the previous page), and the
// cursor of the next page ("" when there is none).
func (r *registry) page(prefix, after string, limit int) (out []regEntry, next string) {
	from := regEntry{key: prefix, pid: actor.NewPID("", "")}
	if after != "" {
		key, id, _ := strings.Cut(after, " ")
		from = regEntry{key: key, pid: actor.NewPID("", id+"\x00")} // just past it
		if key < prefix {
			from = regEntry{key: prefix, pid: actor.NewPID("", "")}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.t.AscendGreaterOrEqual(from, func(e regEntry) bool {
		if !strings.HasPrefix(e.key, prefix) {
			return false
		}
		if len(out) == limit {
			next = cursorOf(out[len(out)-1])
			return false
		}
		out = append(out, e)
		return true
	})
	return out, next
}

// cursorOf is an entry's place in the order: its key and process id
// (keys never hold a space: core.ValidID).
func cursorOf(e regEntry) string { return e.key + " " + e.pid.GetId() }
