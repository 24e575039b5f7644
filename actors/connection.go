package actors

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// MaxTargets bounds one subscribe request.
const MaxTargets = 1000

// Error codes of error frames (HTTP-like, as the contract's statuses).
const (
	ErrCodeBadRequest = 400
)

// Connection messages from the socket layer and the gateway (local).
type (
	connActivate  struct{}
	connBeat      struct{ seq uint64 }
	connClosed    struct{}
	connSubscribe struct {
		requestID string
		targets   []string
	}
	connUnsubscribe struct{ targets []string }
	connShow        struct{ show messages.Show }
)

// connActor is one live connection: its liveness (core.Conn), its lease
// renewals and the sink of its subscriptions. It is a child of its gateway.
type connActor struct {
	g            *Gateway
	user, device string
	id           string
	epoch        uint64
	since        time.Time // when it opened
	sock         Socket
	c            core.Conn
	rng          *rand.Rand

	active bool // the lease was acquired
	ended  bool // released, lost or closed: nothing more to send
	renew  timer
	rereg  timer
	show   messages.Show // last set_status, told again after a re-register

	subs    map[string]*messages.Presence // target -> presence last sent to the device (nil: none yet)
	pending map[string]*pendingSnap
}

// pendingSnap collects a subscribe's SnapshotParts; events for its targets
// wait until the snapshot frame is out.
type pendingSnap struct {
	want map[string]bool
	got  []*messages.Presence
	held []*messages.Presence
}

func newConnActor(g *Gateway, r OpenRequest) *connActor {
	return &connActor{
		g: g, user: r.User, device: r.Device, id: r.ConnID, epoch: r.Attempt, sock: r.Socket, since: r.since,
		rng:  core.Rand(g.n.deps.Seed, r.ConnID),
		subs: map[string]*messages.Presence{}, pending: map[string]*pendingSnap{},
	}
}

func (a *connActor) Receive(ctx actor.Context) {
	now := time.Now()
	t := a.g.n.deps.Timing
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.c = core.NewConn(now)
	case connActivate:
		a.active = true
		a.renew.arm(a.g.n.sched, core.RenewDelay(a.rng, t.Renew, t.RenewJitter, true), ctx.Self(), renewDue{})
	case connBeat:
		if a.c.Beat(now, m.seq) {
			a.g.n.metrics.ClientRestarts.Inc()
		}
	case checkTick:
		// After a stall of this node the next check decides: the
		// heartbeats of the stall are still being read.
		if hold, fenced := a.g.n.stall.hold(); hold > 0 || fenced {
			return
		}
		if a.active && a.c.Stale(now, t.Stale) {
			a.end(ctx, messages.EndReason_ping_timeout, a.c.LastAlive, CloseGoingAway, "ping timeout")
		}
	case renewDue:
		if a.ended {
			return
		}
		a.g.n.dir.Send(KindLease, leaseID(a.user, a.device), &messages.LeaseRenew{User: a.user, Device: a.device, Holder: a.holder()})
		a.renew.arm(a.g.n.sched, core.RenewDelay(a.rng, t.Renew, t.RenewJitter, false), ctx.Self(), renewDue{})
	case reregister:
		// After the change has reached every member (so all route alike),
		// spread over half a renewal so a topology change is not a storm.
		var wait time.Duration
		if co := a.g.n.deps.Cluster; co != nil {
			wait = co.Propagation
		}
		a.rereg.arm(a.g.n.sched, wait+time.Duration(a.rng.Float64()*float64(t.Renew/2)), ctx.Self(), reregisterDue{})
	case reregisterDue:
		a.reregisterNow(ctx)
	case connClosed:
		a.end(ctx, messages.EndReason_close, now, 0, "")
	case *messages.ConnLost:
		if m.GetEpoch() != a.epoch || a.ended {
			return
		}
		if a.g.n.deps.Unfenced {
			// Negative control: a naive gateway cleans up after its socket
			// whatever happened; only fencing stops that from hurting.
			a.release(messages.EndReason_close, now)
		}
		a.ended = true // the lease is someone else's: release nothing
		code := CloseGoingAway
		if m.GetReason() == messages.EndReason_superseded {
			code = CloseSuperseded
		}
		a.sock.Close(code, m.GetReason().String())
		ctx.Stop(ctx.Self())
	case connSubscribe:
		a.subscribe(ctx, m)
	case connUnsubscribe:
		for _, target := range m.targets {
			if _, ok := a.subs[target]; ok {
				delete(a.subs, target)
				a.g.n.dir.Send(KindView, target, &messages.ViewUnsubscribe{Target: target, Sink: refOf(ctx.Self())})
			}
		}
	case connShow:
		a.show = m.show
		a.g.n.dir.Send(KindView, a.user, &messages.DeviceShow{User: a.user, Device: a.device, Show: m.show})
	case *messages.SnapshotPart:
		a.snapshotPart(ctx, m)
	case *messages.PresenceEvent:
		a.event(ctx, m.GetPresence())
	case *actor.Stopping:
		a.renew.stop()
		a.rereg.stop()
		for target := range a.subs {
			a.g.n.dir.Send(KindView, target, &messages.ViewUnsubscribe{Target: target, Sink: refOf(ctx.Self())})
		}
		if a.active && !a.ended && !a.g.crashed.Load() {
			a.release(messages.EndReason_close, now)
			a.sock.Close(CloseGoingAway, "node stopping")
		}
	}
}

// reregisterNow tells the (possibly re-created) lease and views about this
// live connection: the lease re-announces the device to its view, the views
// take this sink back without a snapshot, and the show is set again.
func (a *connActor) reregisterNow(ctx actor.Context) {
	if !a.active || a.ended {
		return
	}
	dir := a.g.n.dir
	dir.Send(KindLease, leaseID(a.user, a.device), &messages.LeaseAcquire{User: a.user, Device: a.device, Holder: a.holder()})
	for target := range a.subs {
		dir.Send(KindView, target, &messages.ViewSubscribe{Target: target, Viewer: a.user, Sink: refOf(ctx.Self()), Reattach: true, Last: a.subs[target]})
	}
	if a.show != messages.Show_show_unspecified {
		dir.Send(KindView, a.user, &messages.DeviceShow{User: a.user, Device: a.device, Show: a.show})
	}
}

func (a *connActor) holder() *messages.Holder {
	return &messages.Holder{Node: a.g.node, ConnId: a.id, Epoch: a.epoch, Gateway: refOf(a.g.pid), SinceMs: a.since.UnixMilli()}
}

func (a *connActor) release(reason messages.EndReason, lastAlive time.Time) {
	a.ended = true
	rel := &messages.LeaseRelease{
		User: a.user, Device: a.device, ConnId: a.id, Epoch: a.epoch, Reason: reason, LastAliveMs: lastAlive.UnixMilli(),
	}
	a.g.n.dir.Send(KindLease, leaseID(a.user, a.device), rel)
	if a.g.n.deps.Timing.FailureDetection > 0 { // members can die: keep it for a replay
		a.g.n.root.Send(a.g.pid, released{rel: rel, at: time.Now()})
	}
}

// end releases the lease with reason, closes the socket (code 0: it is
// closed already) and stops the actor.
func (a *connActor) end(ctx actor.Context, reason messages.EndReason, lastAlive time.Time, code uint16, why string) {
	if a.ended {
		return
	}
	if a.active {
		a.release(reason, lastAlive)
	}
	a.ended = true
	if code != 0 {
		a.sock.Close(code, why)
	}
	ctx.Stop(ctx.Self())
}

func (a *connActor) send(ctx actor.Context, f *messages.Frame) {
	if a.ended {
		return
	}
	if !a.sock.Send(f) {
		// The device stopped reading: drop its queue and let it reconnect and
		// resubscribe; no sender waits for it.
		a.end(ctx, messages.EndReason_close, time.Now(), CloseOverflow, "outbox overflow")
	}
}

func (a *connActor) subscribe(ctx actor.Context, m connSubscribe) {
	bad := func(format string, args ...any) {
		a.send(ctx, &messages.Frame{Kind: &messages.Frame_Error{Error: &messages.Error{
			Code: ErrCodeBadRequest, RequestId: m.requestID, Message: fmt.Sprintf(format, args...),
		}}})
	}
	if len(m.targets) == 0 || len(m.targets) > MaxTargets {
		bad("subscribe: %d targets: must be 1 to %d", len(m.targets), MaxTargets)
		return
	}
	if _, dup := a.pending[m.requestID]; dup {
		bad("subscribe: request_id %q is already pending", m.requestID)
		return
	}
	ps := &pendingSnap{want: map[string]bool{}}
	for _, target := range m.targets {
		if err := core.ValidID("target", target); err != nil {
			bad("subscribe: %v", err)
			return
		}
		ps.want[target] = true
	}
	a.pending[m.requestID] = ps
	for target := range ps.want {
		a.subs[target] = nil
		a.g.n.dir.Send(KindView, target, &messages.ViewSubscribe{Target: target, Viewer: a.user, Sink: refOf(ctx.Self()), RequestId: m.requestID})
	}
}

func (a *connActor) snapshotPart(ctx actor.Context, m *messages.SnapshotPart) {
	ps := a.pending[m.GetRequestId()]
	if ps == nil || !ps.want[m.GetTarget()] {
		return
	}
	delete(ps.want, m.GetTarget())
	if p := m.GetPresence(); m.GetVisible() && p != nil {
		ps.got = append(ps.got, p)
		a.subs[p.GetUser()] = p
	}
	if len(ps.want) > 0 {
		return
	}
	delete(a.pending, m.GetRequestId())
	a.send(ctx, &messages.Frame{Kind: &messages.Frame_Snapshot{Snapshot: &messages.Snapshot{RequestId: m.GetRequestId(), Presences: ps.got}}})
	for _, p := range ps.held {
		a.event(ctx, p)
	}
}

// event forwards a change unless its version is not newer than what the
// device has, or holds it while a snapshot of its target is being put
// together.
func (a *connActor) event(ctx actor.Context, p *messages.Presence) {
	if a.g.n.dropStale(ctx, p.GetUser()) {
		return
	}
	last, ok := a.subs[p.GetUser()]
	if !ok || p.GetVersion() <= last.GetVersion() {
		return
	}
	for _, ps := range a.pending {
		if ps.want[p.GetUser()] || containsUser(ps.got, p.GetUser()) {
			ps.held = append(ps.held, p)
			return
		}
	}
	a.subs[p.GetUser()] = p
	a.send(ctx, &messages.Frame{Kind: &messages.Frame_Presence{Presence: p}})
}

func containsUser(ps []*messages.Presence, user string) bool {
	for _, p := range ps {
		if p.GetUser() == user {
			return true
		}
	}
	return false
}
