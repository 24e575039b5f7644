package actors

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus"
)

// connOut is a connection's sink (core.Sink) and socket behind one lock.
// Its actor writes through it (snapshots, error frames) and so do the
// node's fan-out workers (events, sinkHub): the order in which the sink
// decides is the order of the frames on the socket, so the sink's promises
// (the snapshot before any change of its targets, versions never going
// back) hold whichever goroutine writes. Without it every event was one
// actor message per subscriber (a mailbox, a goroutine per wake-up): the
// fan-out of one offline to 5,000 subscribers (BENCHMARKS.md).
type connOut struct {
	mu     sync.Mutex
	sink   *core.Sink
	sock   Socket
	closed bool // the connection ended or overflowed: nothing more is sent
	// shard is the fan-out worker that writes this connection's events, the
	// same one every time so that they stay in the order views sent them.
	shard uint32
	// batch is the batched tier's flush (tier.go); nil until a batched
	// subscribe.
	batch *batchOut
	// self is the connection's actor, for an overflow found by a walk of
	// the hub (degrade.go); set when it joins the hub.
	self *actor.PID
}

// sendLocked hands frames to the socket in order; false: the outbox is
// full (the device stopped reading), and nothing more is sent.
func (o *connOut) sendLocked(frames []*messages.Frame) bool {
	for _, f := range frames {
		if o.closed {
			return true
		}
		if !o.sock.Send(f) {
			o.closed = true
			return false
		}
	}
	return true
}

// event passes one view's event through the sink to the socket: f, the
// event's frame shared read-only by all its subscribers (nil: made here),
// if the sink takes p; the frames handed to the socket (0 or 1), and false
// if the outbox overflowed.
func (o *connOut) event(p *messages.Presence, f *messages.Frame) (int, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return 0, true
	}
	n, ok := 0, true
	if o.sink.Take(p) {
		if f == nil {
			f = &messages.Frame{Kind: &messages.Frame_Presence{Presence: p}}
		}
		n, ok = 1, o.sendLocked([]*messages.Frame{f})
	}
	o.armLocked()
	return n, ok
}

// connOverflow tells a connection actor that a fan-out worker found its
// outbox full: it ends as if its own write had (CloseOverflow).
type connOverflow struct{}

// sinkHub is a node's fan-out: the subscribing connections by their actor's
// id, and one worker per core that writes the events handed to it
// straight to their sockets. A view hands the event for its own node's
// sinks to it (Node.fanout), and the fan-out actor one from another node's
// view, so an event is one call and a write per socket, not a message per
// subscriber. Workers run while they have work (no goroutine when idle).
type sinkHub struct {
	// mu guards conns. Lock order: mu, then a connOut's mu; never the
	// other way (add is called without the connection's lock).
	mu     sync.RWMutex
	conns  map[string]*connOut // actor id -> its sink and socket
	next   atomic.Uint32
	shards []fanShard
	// longest is the longest event's fan-out since the last backlog
	// reading (nanoseconds; degrade.go).
	longest atomic.Int64
	// overflow tells a connection's actor its outbox is full.
	overflow func(*actor.PID)
}

type fanShard struct {
	mu      sync.Mutex
	jobs    []fanJob
	running bool
	cur     atomic.Int64 // the job being written: its event's start (Unix ns); 0: none
}

// fanJob is one event for the connections of one shard.
type fanJob struct {
	p    *messages.Presence
	f    *messages.Frame // p's frame, one for every subscriber (connOut.event)
	outs []*connOut
	pids []*actor.PID // their actors, for an overflow
	ev   *fanEvent
}

// fanEvent is one deliver call: when the last of its jobs is written, the
// time since the call is observed (presence_fanout_seconds).
type fanEvent struct {
	start   time.Time
	left    atomic.Int32
	onEnd   func(*actor.PID)
	observe func(time.Duration)
	frames  prometheus.Counter // realtime frames written (nil: not counted)
}

// written counts a job's frames.
func (e *fanEvent) written(n int) {
	if e.frames != nil && n > 0 {
		e.frames.Add(float64(n))
	}
}

func (e *fanEvent) jobDone() {
	if e.left.Add(-1) == 0 {
		e.observe(time.Since(e.start))
	}
}

func newSinkHub() *sinkHub {
	return &sinkHub{conns: map[string]*connOut{}, shards: make([]fanShard, max(runtime.GOMAXPROCS(0), 1))}
}

// add makes a connection reachable by the fan-out (at its first
// subscribe, before any view knows its sink); o.mu not held.
func (h *sinkHub) add(self *actor.PID, o *connOut) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o.shard, o.self = h.next.Add(1)%uint32(len(h.shards)), self
	h.conns[self.GetId()] = o
}

// load is the connection of an actor id, if in the hub.
func (h *sinkHub) load(id string) (*connOut, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	o, ok := h.conns[id]
	return o, ok
}

// all is the hub's connections now, for a walk that writes (each): the
// hub is not held while their sockets are.
func (h *sinkHub) all() []*connOut {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*connOut, 0, len(h.conns))
	for _, o := range h.conns {
		out = append(out, o)
	}
	return out
}

// subscriptions sums the targets the hub's connections are subscribed to,
// by tier, and counts the connections with any (presence_subscriptions,
// presence_subscribers: the amplification's per-subscriber side).
func (h *sinkHub) subscriptions() (realtime, batched, subscribers int) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, o := range h.conns {
		o.mu.Lock()
		rt, bt := o.sink.Subscribed()
		o.mu.Unlock()
		realtime, batched = realtime+rt, batched+bt
		if rt+bt > 0 {
			subscribers++
		}
	}
	return realtime, batched, subscribers
}

// remove forgets a connection (when its actor stops).
func (h *sinkHub) remove(id string, o *connOut) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conns[id] == o {
		delete(h.conns, id)
	}
}

// deliver hands p to each named sink of this node: those the hub knows go
// to their shard's worker; any other (a sink that is not a connection, or
// one that stopped) gets a PresenceEvent, as before the hub. ev.onEnd is
// told the actors whose outbox overflowed.
func (h *sinkHub) deliver(root *actor.RootContext, p *messages.Presence, pids []*actor.PID, ev *fanEvent) {
	jobs := make([]fanJob, len(h.shards))
	each := len(pids)/len(jobs) + 1 // the connections spread evenly over the shards (add)
	for i := range jobs {
		jobs[i].outs, jobs[i].pids = make([]*connOut, 0, each), make([]*actor.PID, 0, each)
	}
	var others []*actor.PID // not in the hub
	h.mu.RLock()
	for _, pid := range pids {
		o, ok := h.conns[pid.GetId()]
		if !ok {
			others = append(others, pid)
			continue
		}
		j := &jobs[o.shard]
		j.outs, j.pids = append(j.outs, o), append(j.pids, pid)
	}
	h.mu.RUnlock()
	if len(others) > 0 {
		msg := &messages.PresenceEvent{Presence: p}
		for _, pid := range others {
			root.Send(pid, msg)
		}
	}
	for i := range jobs {
		if len(jobs[i].outs) > 0 {
			ev.left.Add(1)
		}
	}
	f := &messages.Frame{Kind: &messages.Frame_Presence{Presence: p}}
	for i := range jobs {
		if len(jobs[i].outs) > 0 {
			jobs[i].p, jobs[i].f, jobs[i].ev = p, f, ev
			h.shards[i].push(jobs[i])
		}
	}
}

// push queues a job and starts the shard's worker if it is not running.
func (s *fanShard) push(j fanJob) {
	s.mu.Lock()
	s.jobs = append(s.jobs, j)
	start := !s.running
	s.running = true
	s.mu.Unlock()
	if start {
		go s.run()
	}
}

// run writes the queued jobs in order until none is left.
func (s *fanShard) run() {
	for {
		s.mu.Lock()
		jobs := s.jobs
		s.jobs = nil
		if len(jobs) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		for _, j := range jobs {
			s.cur.Store(j.ev.start.UnixNano())
			written := 0
			for i, o := range j.outs {
				n, ok := o.event(j.p, j.f)
				written += n
				if !ok {
					j.ev.onEnd(j.pids[i])
				}
			}
			j.ev.written(written)
			j.ev.jobDone()
		}
		s.cur.Store(0)
	}
}

// unhub takes the connection out of the fan-out.
func (a *connActor) unhub(ctx actor.Context) {
	if a.hubbed {
		a.hubbed = false
		a.env.hub.remove(ctx.Self().GetId(), &a.out)
	}
}

// subscriptions is the number of targets the connection subscribes to.
func (a *connActor) subscriptions() int {
	a.out.mu.Lock()
	defer a.out.mu.Unlock()
	return len(a.out.sink.Targets())
}

// fanout hands an event to sinks on this node (sinkHub).
func (n *Node) fanout(p *messages.Presence, sinks []*actor.PID) {
	n.hub.deliver(n.root, p, sinks, &fanEvent{start: time.Now(), onEnd: n.overflowed, observe: n.fanoutTook, frames: n.realtimeFrames})
}

// fanoutTook observes one event's fan-out on this node.
func (n *Node) fanoutTook(d time.Duration) {
	n.metrics.Fanout.Observe(d.Seconds())
	n.hub.took(d)
}

// overflowed tells a connection actor its outbox overflowed.
func (n *Node) overflowed(pid *actor.PID) { n.root.Send(pid, connOverflow{}) }
