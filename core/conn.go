package core

import "time"

// Conn is the liveness state of one connection: when it was last alive
// and its heartbeat sequence (Beats: restarts and the drift fuse).
// Heartbeat frames and WebSocket Pings and Pongs all count as life.
// Production keeps the two halves apart, each where it is read: the
// socket runs Beats on every heartbeat and stores the time in an atomic
// (actors.Conn.Heartbeat), the connection actor keeps LastAlive for its
// stale check; the E01 simulator (sim) runs both here.
type Conn struct {
	Opened    time.Time
	LastAlive time.Time
	Beats
}

// NewConn starts a connection's liveness at now.
func NewConn(now time.Time) Conn { return Conn{Opened: now, LastAlive: now} }

// Heartbeat records a sign of life at now: a heartbeat (seq >= 1, with
// the client's time in Unix ms, 0 if not given) or a Ping or Pong (seq 0).
// It is Alive and Beats.Beat, the two halves production runs apart.
func (c *Conn) Heartbeat(now time.Time, seq uint64, clientTS int64) BeatResult {
	c.Alive(now)
	return c.Beats.Beat(seq, clientTS)
}

// Alive records a sign of life at at; an earlier one changes nothing.
func (c *Conn) Alive(at time.Time) {
	if at.After(c.LastAlive) {
		c.LastAlive = at
	}
}

// Beat is Heartbeat without a client time; it reports a seq that did not
// grow (the client restarted its counter).
func (c *Conn) Beat(now time.Time, seq uint64) (restart bool) {
	return c.Heartbeat(now, seq, 0).Restart
}

// Stale reports whether the connection went longer than stale without a sign
// of life. With stale > 2 x heartbeat one lost heartbeat is never stale.
func (c *Conn) Stale(now time.Time, stale time.Duration) bool {
	return now.Sub(c.LastAlive) > stale
}
