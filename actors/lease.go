package actors

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
)

// leaseActor owns one device's core.Lease. It expires the lease with a
// self-message scheduled at renewal+TTL (no sweep over all leases), tells the
// user's view of every up and down, and tells a superseded or refused
// connection's gateway to close it.
type leaseActor struct {
	env          *leaseEnv
	user, device string
	l            core.Lease
	received     uint64 // directory messages handled, for passivation (kept across a restart: births)
	expiry, idle timer
	idleGen      uint64
	// floorUnread: the floor is not read yet (read at the first message
	// that is not a handshake, taken with a handshake's write: takeFloor),
	// or could not be (the store down); no handshake is accepted until it
	// is. floorTried: a read was tried.
	floorUnread, floorTried bool
}

func (a *leaseActor) Receive(ctx actor.Context) {
	now := time.Now()
	held, stopping := a.l.Live(), false
	defer func() { a.env.metrics.heldDelta(held, a.l.Live() && !stopping) }()
	if !a.floorTried && a.readsFloorFirst(ctx.Message()) {
		a.l.Floor, a.floorUnread = a.readFloor()
		a.floorTried = true
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.onStarted(ctx)
	case *actor.Stopping, *actor.Restarting: // a restart (a panic) starts it anew
		stopping = true // its holder no longer counts
		if _, ok := m.(*actor.Restarting); ok {
			a.env.births.leave(ctx.Self().GetId(), identity{leaseID(a.user, a.device), a.received})
		}
		a.env.life.deactivated(KindLease, leaseID(a.user, a.device), ctx.Self())
		a.expiry.stop()
		a.idle.stop()
	case *messages.LeaseAcquire:
		a.env.life.handled(KindLease, &a.received)
		res := a.acquire(ctx, m, now)
		if ctx.Sender() != nil { // re-registers are sent, not requested
			ctx.Respond(res)
		}
	case *messages.LeaseRenew:
		a.env.life.handled(KindLease, &a.received)
		a.renew(ctx, m, now)
	case *messages.LeaseRelease:
		a.env.life.handled(KindLease, &a.received)
		res := a.l.Release(m.GetConnId(), m.GetEpoch(), m.GetReason(), time.UnixMilli(m.GetLastAliveMs()))
		a.apply(ctx, res, "release", now)
	case *messages.ActorStateQuery: // from the inspector, not the directory
		ctx.Respond(a.info(now))
	case *messages.GatewayDown: // from the node, not through the directory: not counted
		a.apply(ctx, a.l.GatewayDownBefore(m.GetNode(), openedBefore(m), lastHeard(m)), "gateway_down", now)
	case leaseExpire:
		// A stale generation: a renewal re-armed it (the cancel raced the
		// firing). The gate stops a leftover of an earlier topology: the
		// owner's lease is the one that counts; expiring here would report a
		// live device gone.
		if m.gen == a.l.Gen && a.env.guard.gate(ctx, gate{&a.expiry, m, KindLease, leaseID(a.user, a.device)}) {
			a.apply(ctx, a.l.Expire(m.gen, now), "expire", now)
		}
	case idleCheck:
		if m.gen == a.idleGen && !a.l.Live() {
			if !a.env.life.passivate(ctx, KindLease, leaseID(a.user, a.device), a.received) {
				a.armIdle(ctx) // a message on its way: check again later
			}
		}
	}
}

// onStarted leaves the device's attempt floor unread: a lease re-created
// empty never accepts an attempt it refused before, as it reads the floor
// before anything else it handles, or takes it with a handshake's write
// (a cold connect's one trip to the store).
func (a *leaseActor) onStarted(ctx actor.Context) {
	b := a.env.births.take(ctx).(identity)
	a.user, a.device, _ = cutID(b.id)
	a.received = b.received
	a.env.life.activated(KindLease, leaseID(a.user, a.device), ctx.Self())
	a.floorUnread = true
	a.armIdle(ctx)
}

// readsFloorFirst says whether the lease reads its floor before handling
// m: anything that may move or report the lease, not its own life's
// messages, and not a handshake, which takes the floor (acquire).
func (a *leaseActor) readsFloorFirst(m any) bool {
	switch m := m.(type) {
	case *messages.LeaseAcquire:
		return !m.GetHandshake()
	case *messages.LeaseRenew, *messages.LeaseRelease, *messages.ActorStateQuery, *messages.GatewayDown, leaseExpire:
		return true
	}
	return false
}

// readFloor reads the device's attempt floor from the store; unread: it
// could not.
func (a *leaseActor) readFloor() (floor uint64, unread bool) {
	floor, err := a.env.floors.Floor(context.Background(), a.user, a.device)
	if err != nil {
		a.env.log.Debug("lease: reading attempt floor", "user", a.user, "device", a.device, "err", err)
	}
	return floor, err != nil
}

// takeFloor makes a handshake's attempt the device's floor in the store if
// it is above the stored one, in one write that also finds the stored
// floor (store.TakeFloor): a lease that has not read its floor learns it
// here. Taken, the lease's own floor stays below the attempt, which the
// acquire then raises; not taken, it is the stored floor, and the acquire
// refuses the attempt as stale.
func (a *leaseActor) takeFloor(attempt uint64) error {
	t, err := store.TakeFloor(context.Background(), a.env.floors, a.user, a.device, attempt)
	a.floorTried = true
	if err != nil {
		a.env.log.Debug("lease: taking attempt floor", "user", a.user, "device", a.device, "err", err)
		return fmt.Errorf("attempt floor not stored: %w", err)
	}
	a.floorUnread = false
	if !t.OK {
		a.l.Floor = max(a.l.Floor, t.Floor)
	}
	return nil
}

// renew tells a connection whose renewal was refused that it lost the
// lease, and writes a floor the renewal raised.
func (a *leaseActor) renew(ctx actor.Context, m *messages.LeaseRenew, now time.Time) {
	floor := a.l.Floor
	res := a.l.Renew(m.GetHolder(), now, a.env.timing.TTL)
	if res.Err != nil {
		a.lost(ctx, m.GetHolder())
	} else {
		a.env.metrics.Renewals.Inc()
		a.env.renewals.Add(1)
	}
	a.saveFloor(floor)
	a.apply(ctx, res, "renew", now)
}

// acquire writes a raised attempt floor through to the history store before
// accepting, so a later, older handshake is refused even after this actor
// passivates; if the write fails nothing changes.
func (a *leaseActor) acquire(ctx actor.Context, m *messages.LeaseAcquire, now time.Time) *messages.LeaseAcquired {
	h := m.GetHolder()
	if m.GetHandshake() && a.floorUnread {
		// A floor it never read may be above this attempt: take it.
		if err := a.takeFloor(h.GetEpoch()); err != nil {
			return &messages.LeaseAcquired{Floor: a.l.Floor, Error: err.Error()}
		}
	} else if m.GetHandshake() && h.GetEpoch() > a.l.Floor {
		if err := a.env.floors.RaiseFloor(context.Background(), a.user, a.device, h.GetEpoch()); err != nil {
			a.env.log.Debug("lease: writing attempt floor", "user", a.user, "device", a.device, "err", err)
			return &messages.LeaseAcquired{Floor: a.l.Floor, Error: "attempt floor not stored: " + err.Error()}
		}
	}
	floor := a.l.Floor
	res := a.l.Acquire(h, m.GetHandshake(), now, a.env.timing.TTL)
	if !m.GetHandshake() {
		a.saveFloor(floor)
	}
	a.apply(ctx, res, "acquire", now)
	out := &messages.LeaseAcquired{Ok: res.Err == nil, Floor: a.l.Floor}
	if res.Err != nil {
		out.Error = res.Err.Error()
	}
	return out
}

// saveFloor writes the floor if a re-register or revive raised it above was.
func (a *leaseActor) saveFloor(was uint64) {
	if a.l.Floor <= was {
		return
	}
	if err := a.env.floors.RaiseFloor(context.Background(), a.user, a.device, a.l.Floor); err != nil {
		a.env.log.Debug("lease: writing attempt floor", "user", a.user, "device", a.device, "err", err)
	}
}

// lost tells the gateway of a connection whose renew was refused that it no
// longer holds the lease, so it closes instead of living on as a ghost.
func (a *leaseActor) lost(ctx actor.Context, h *messages.Holder) {
	reason := messages.EndReason_superseded
	if a.l.Holder == nil && a.l.Ended {
		reason = a.l.EndedReason
	}
	if gw := pidOf(h.GetGateway()); gw != nil {
		sendFrom(ctx, gw, &messages.ConnLost{ConnId: h.GetConnId(), Epoch: h.GetEpoch(), Reason: reason})
	}
}

func (a *leaseActor) apply(ctx actor.Context, res core.LeaseResult, op string, now time.Time) {
	if res.Err != nil {
		a.env.metrics.RejectedStale.WithLabelValues(op).Inc()
		a.env.log.Debug("lease: refused", "op", op, "user", a.user, "device", a.device, "err", res.Err)
		return
	}
	if res.Expiry != nil {
		a.expiry.arm(a.env.sched, res.Expiry.At.Sub(now), ctx.Self(), leaseExpire{res.Expiry.Gen})
	}
	if old := res.Superseded; old != nil {
		if gw := pidOf(old.GetGateway()); gw != nil {
			sendFrom(ctx, gw, &messages.ConnLost{ConnId: old.GetConnId(), Epoch: old.GetEpoch(), Reason: messages.EndReason_superseded})
		}
	}
	switch {
	case res.Up:
		a.idleGen++
		a.idle.stop()
		a.env.metrics.DeviceTransitions.WithLabelValues("up", "").Inc()
		a.env.log.Debug("lease: up", "user", a.user, "device", a.device, "holder_node", a.l.Holder.GetNode(), slog.Uint64("epoch", a.l.Holder.GetEpoch()))
		a.env.emit(&messages.ObsEvent{Kind: "device_up", User: a.user, Device: a.device, Gateway: a.l.Holder.GetNode()})
		a.env.dir.Send(KindView, a.user, &messages.DeviceUp{User: a.user, Device: a.device, Holder: a.l.Holder, SinceMs: now.UnixMilli()})
	case res.Changed: // the device's declared state: the view derives from it
		a.env.dir.Send(KindView, a.user, &messages.DeviceUp{User: a.user, Device: a.device, Holder: a.l.Holder, SinceMs: now.UnixMilli()})
	case res.Down:
		a.expiry.stop()
		a.env.metrics.DeviceTransitions.WithLabelValues("down", res.Reason.String()).Inc()
		a.env.log.Debug("lease: ended", "user", a.user, "device", a.device, "reason", res.Reason.String(), slog.Uint64("epoch", a.l.EndedEpoch))
		a.env.emit(&messages.ObsEvent{Kind: "device_down", User: a.user, Device: a.device, Reason: res.Reason.String()})
		if a.tellsView(res.Reason) {
			a.env.dir.Send(KindView, a.user, &messages.DeviceDown{User: a.user, Device: a.device, Epoch: a.l.EndedEpoch, Reason: res.Reason, LastAliveMs: res.LastAlive.UnixMilli()})
		}
		a.armIdle(ctx)
	}
}

// tellsView reports whether the user's view must hear of the lease's end
// from the lease. A member's failure reaches every view from its own node
// (Node.onMember), with the devices held there whose leases died with
// it: a lease ended by it (gateway_down) tells only a view that may have
// moved since the settle window began, a new one that never had the
// device (the old one died with the member, or lived elsewhere).
func (a *leaseActor) tellsView(reason messages.EndReason) bool {
	return reason != messages.EndReason_gateway_down || a.env.place.mayHaveMoved(KindView, a.user)
}

func (a *leaseActor) armIdle(ctx actor.Context) {
	a.idleGen++
	a.idle.arm(a.env.sched, a.env.timing.Idle, ctx.Self(), idleCheck{a.idleGen})
}
