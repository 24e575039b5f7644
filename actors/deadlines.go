package actors

import (
	"container/heap"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/core"
	"github.com/prometheus/client_golang/prometheus"
)

// liveConn is the gateway's entry for one of its connections. The socket
// stores the last sign of life in alive (an atomic, no message per
// heartbeat: Conn.Heartbeat); the gateway reads it when the entry is due,
// the connection actor when it checks itself.
type liveConn struct {
	pid   *actor.PID
	alive atomic.Int64  // last sign of life, Unix ns (Conn.Heartbeat)
	stale time.Duration // its heartbeat class's (config.Class)
	gone  bool          // terminated: dropped when it next comes due
	due   time.Time     // when the gateway looks at it next
	// expires is when its credential does (Unix ns; 0: never): the
	// connection is told to close then (OpenRequest.Expires, expiryNanos).
	expires int64

	// The heartbeat sequence (restarts, the drift fuse) and the platform's
	// heartbeat counter, touched by the socket's reads only (Conn.Heartbeat);
	// the lock keeps tests that beat from several goroutines honest.
	mu    sync.Mutex
	beats core.Beats
	beat  prometheus.Counter
}

// deadlines is a min-heap of connections by due time: a check period
// touches only the connections that are due (those whose last sign of life
// is older than stale, and those it told to check themselves last period),
// not every connection.
type deadlines []*liveConn

func (d deadlines) Len() int           { return len(d) }
func (d deadlines) Less(i, j int) bool { return d[i].due.Before(d[j].due) }
func (d deadlines) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *deadlines) Push(x any)        { *d = append(*d, x.(*liveConn)) }
func (d *deadlines) Pop() any {
	old := *d
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*d = old[:len(old)-1]
	return c
}

// due pops the connections whose last sign of life is older than their stale at
// now; one alive since is put back at its new deadline, a terminated one is
// dropped. A connection told to check itself is put back one check later:
// if it was not stale after all (a heartbeat in its mailbox) or a stall
// holds its decision, the next period looks again. A connection whose
// credential expired by now is told so (expire), again each check until it
// stops.
func (d *deadlines) due(now time.Time, check time.Duration, tell, expire func(*actor.PID)) {
	for d.Len() > 0 && !(*d)[0].due.After(now) {
		c := heap.Pop(d).(*liveConn)
		if c.gone {
			continue
		}
		if at := time.Unix(0, c.alive.Load()).Add(c.stale); at.After(now) {
			c.due = at
		} else {
			tell(c.pid)
			c.due = now.Add(check)
		}
		if c.expires != 0 && c.expires <= now.UnixNano() {
			expire(c.pid) // again each check until it stops: closing twice is closing once
			c.dueBy(now.Add(check).UnixNano())
		} else {
			c.dueBy(c.expires)
		}
		heap.Push(d, c)
	}
}

// expiryNanos is an expiry as liveConn.expires keeps it: 0 for none, or
// for one past what Unix nanoseconds hold (after 2262: a token minted to
// never expire), which would wrap to the past; at least 1 ns otherwise.
func expiryNanos(t time.Time) int64 {
	if t.IsZero() || t.After(time.Unix(0, math.MaxInt64)) {
		return 0
	}
	return max(t.UnixNano(), 1)
}

// dueBy brings the entry's due time forward to expires (Unix ns; 0: none).
func (c *liveConn) dueBy(expires int64) {
	if at := time.Unix(0, expires); expires != 0 && at.Before(c.due) {
		c.due = at
	}
}
