package core

import "time"

// Conn is the liveness state of one connection, owned by its
// connActor. Heartbeat frames and WebSocket Pongs both count.
type Conn struct {
	Opened    time.Time
	LastAlive time.Time
	Seq       uint64 // last heartbeat seq
	Restarts  uint64 // times the client's seq started again
}

// NewConn starts a connection's liveness at now.
func NewConn(now time.Time) Conn { return Conn{Opened: now, LastAlive: now} }

// Beat records a sign of life. A heartbeat seq that does not grow means the
// client restarted its counter; it reports true. Seq 0 is a Pong (no seq).
func (c *Conn) Beat(now time.Time, seq uint64) (restart bool) {
	if now.After(c.LastAlive) {
		c.LastAlive = now
	}
	if seq == 0 {
		return false
	}
	restart = c.Seq != 0 && seq <= c.Seq
	if restart {
		c.Restarts++
	}
	c.Seq = seq
	return restart
}

// Stale reports whether the connection went longer than stale without a sign
// of life. With stale > 2 x heartbeat one lost heartbeat is never stale.
func (c *Conn) Stale(now time.Time, stale time.Duration) bool {
	return now.Sub(c.LastAlive) > stale
}
