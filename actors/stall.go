package actors

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A node that did not run for a while (SIGSTOP, a VM pause, a starved
// machine) wakes with its timers overdue and the messages that would have
// stopped them (renewals, heartbeats) still unread in its sockets. Verdicts
// by time, a lease expiring or a connection going stale, wait until the
// node has run for stallGrace after any stall, so those messages are read
// first. A fenced node (its members may have declared it dead) gives no
// verdict at all: it is about to close everything and restart.
const (
	stallTick  = 50 * time.Millisecond
	stallGap   = 250 * time.Millisecond // a tick this late marks a stall
	stallGrace = 500 * time.Millisecond
	// stallMax caps the holding: a node that keeps stalling (starved, not
	// paused) gives its verdicts anyway after this long, late rather than
	// never.
	stallMax = 2 * time.Second
	// A verdict due while the node is in doubt (cluster.Roster.Doubt) asks
	// again after a quarter of the doubt so far, within these: a doubt on
	// the serving side lasts a round trip, and a long one (a member that
	// answers no ping) must not re-arm every held timer 50 times a second.
	doubtHoldMin = 20 * time.Millisecond
	doubtHoldMax = 500 * time.Millisecond
)

// DoubtHold is how long a verdict due in a doubt d old waits before it
// asks again (the chaos harness's lease bound counts it).
func DoubtHold(d time.Duration) time.Duration { return min(max(d/4, doubtHoldMin), doubtHoldMax) }

type stallClock struct {
	base   time.Time
	last   atomic.Int64 // since base, of the last tick
	until  atomic.Int64 // since base: verdicts wait until then
	streak atomic.Int64 // since base: when the current run of stalls began
	fenced atomic.Bool
	done   chan struct{}
	ended  chan struct{}
}

func newStallClock() *stallClock {
	s := &stallClock{base: time.Now(), done: make(chan struct{}), ended: make(chan struct{})}
	go s.run()
	return s
}

func (s *stallClock) run() {
	defer close(s.ended)
	t := time.NewTicker(stallTick)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		now := int64(time.Since(s.base))
		if now-s.last.Load() > int64(stallGap) {
			if now > s.until.Load() { // a new run of stalls, from this one's end
				s.streak.Store(now)
			}
			s.until.Store(now + int64(stallGrace))
		}
		s.last.Store(now)
	}
}

func (s *stallClock) stop() {
	close(s.done)
	<-s.ended
}

// hold is how long a verdict due now must wait (0: give it), and whether
// the node is fenced (give none).
func (s *stallClock) hold() (time.Duration, bool) {
	if s.fenced.Load() {
		return 0, true
	}
	now := int64(time.Since(s.base))
	if now-s.last.Load() > int64(stallGap) {
		return stallGrace, false // in a stall the ticker has not seen yet
	}
	if u := s.until.Load(); now < u && now-s.streak.Load() < int64(stallMax) {
		return time.Duration(u - now), false
	}
	return 0, false
}

// gate is what a verdict by time (an expiry, a debounced offline, a stale
// connection) passes before it is given: the timer and message to re-arm
// for the hold after a stall (nil: the next tick decides anyway), and the
// identity its actor must still own (kind "": none).
type gate struct {
	timer *timer
	msg   any
	kind  Kind
	id    string
}

// gate is the one guard in front of every verdict by time: a fenced node
// gives none; after a stall the verdict waits (its timer re-armed) until
// what came meanwhile is read; after a death verdict not yet confirmed by
// enough members answering (cluster.Roster.Doubt: this node may be the
// one cut off) it waits likewise; an actor that no longer owns its identity
// (it moved, or a stale route activated it here) stops instead, since the
// owner's actor knows better: its directory forgets it at once (a later
// message activates a new actor), and it handles what was already sent to
// it before it stops, as a moved actor does (LocalDirectory.stopMoved).
func (n *Node) gate(ctx actor.Context, g gate) bool {
	hold, fenced := n.stall.hold()
	if fenced {
		return false
	}
	if d := n.inDoubt(); hold == 0 && d > 0 {
		hold = DoubtHold(d)
	}
	if hold > 0 {
		if g.timer != nil {
			g.timer.arm(n.sched, hold, ctx.Self(), g.msg)
		}
		return false
	}
	if g.kind != "" && !n.owns(g.kind, g.id) {
		n.dir.Forget(g.kind, g.id, ctx.Self())
		ctx.Poison(ctx.Self())
		return false
	}
	return true
}
