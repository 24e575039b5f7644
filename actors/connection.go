package actors

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/proto"
)

// Connection messages from the socket layer and the gateway (local).
type (
	connActivate  struct{}
	connBeat      struct{ seq uint64 }
	connClosed    struct{}
	connSubscribe struct {
		requestID string
		targets   []string
		tier      messages.Tier
	}
	connUnsubscribe struct{ targets []string }
	connShow        struct {
		show      messages.Show
		text      string
		expiresMs int64
	}
	connActivity  struct{ activity messages.Activity }
	connStateSync struct {
		nonce    string
		activity messages.Activity
	}
	connDrift struct{ core.Drift }
)

// connActor is one live connection: its liveness (core.Conn), its lease
// renewals and the sink of its subscriptions (core.Sink). It is a child of
// its gateway.
type connActor struct {
	g            *Gateway
	env          *connEnv
	user, device string
	id           string
	epoch        uint64
	since        time.Time // when it opened
	c            core.Conn
	live         *liveConn // the gateway's entry: c.LastAlive for its deadlines
	// out is the sink and the socket, shared with the node's fan-out once
	// the connection subscribes (hubbed).
	out    connOut
	hubbed bool
	rng    *rand.Rand

	active bool // the lease was acquired
	ended  bool // released, lost or closed: nothing more to send
	// reregArmed: a re-register is armed and not sent yet; a later
	// membership change does not postpone it (onReregister).
	reregArmed bool
	renew      timer
	rereg      timer
	// status is the newest status of the user this connection heard: its
	// own set_status, or what the view told it (ConnStatus), told again
	// after a re-register.
	status *messages.DeviceShow
	// dev is the device's declared state (activity.go).
	dev devState
	// reregGen tags the re-register armed last (its timer and the lease's
	// answer); reregTries counts its failures.
	reregGen   uint64
	reregTries int
}

// connBirth is what a connection actor starts from (births.go): its
// handshake's request, left by its gateway's spawn, and, left by an
// instance a restart replaces, whether it holds the lease: the new
// instance renews it and releases it on close as the old one would have
// (a blank one released nothing, so its device went offline at the
// lease's expiry after its close, not after the debounce).
type connBirth struct {
	req    OpenRequest
	active bool
}

// born sets up a connection actor from its birth.
func (a *connActor) born(ctx actor.Context, b connBirth) {
	r := b.req
	sink := core.NewSink()
	sink.Max = a.env.subscriptions
	a.user, a.device, a.id, a.epoch, a.since, a.live = r.User, r.Device, r.ConnID, r.Attempt, r.since, r.live
	a.rng = core.Rand(a.env.seed, r.ConnID)
	a.out = connOut{sink: sink, sock: r.Socket}
	a.dev = devState{DeviceState: core.NewDeviceState(platformOr(r.Platform), r.Activity, r.since, a.env.timing.IdleAfter), class: r.Class}
	a.armLapse(ctx)
	if b.active {
		a.activate(ctx)
	}
}

// rebirth is what the instance that replaces this one starts from.
func (a *connActor) rebirth() connBirth {
	return connBirth{OpenRequest{User: a.user, Device: a.device, Attempt: a.epoch, ConnID: a.id, Socket: a.out.sock, since: a.since, live: a.live,
		Platform: a.dev.Platform, Activity: a.dev.Activity, Class: a.dev.class}, a.active && !a.ended}
}

// activate starts renewing the lease the handshake acquired.
func (a *connActor) activate(ctx actor.Context) {
	a.active = true
	a.dev.count(a.env.metrics, 1)
	a.armRenew(ctx, true)
	a.reregisterIfEarly(ctx)
}

// reregisterIfEarly re-registers a connection opened before its node's
// last membership change can have reached every member, when its lease or
// its user's view may have moved: they were placed by this node's new
// topology, which the others may not route by yet (a lease there told the
// user's view at the member it still places it on, and the view every
// member places once the change arrives settles without the device). It
// re-registers once the change has reached them all, as the connections
// open at the change do (onReregister). A node alone moved nothing.
func (a *connActor) reregisterIfEarly(ctx actor.Context) {
	left := a.env.propagation - time.Since(a.env.place.lastChange())
	if left <= 0 || !a.env.place.mayHaveMoved(KindLease, leaseID(a.user, a.device)) && !a.env.place.mayHaveMoved(KindView, a.user) {
		return
	}
	a.armReregister(ctx, left)
}

func (a *connActor) Receive(ctx actor.Context) {
	now := time.Now()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.born(ctx, a.env.births.take(ctx).(connBirth))
		a.c = core.NewConn(now)
		a.env.index.add(leaseID(a.user, a.device), ctx.Self())
	case *messages.ActorStateQuery:
		ctx.Respond(a.info(now))
	case connActivate:
		a.activate(ctx)
	case connBeat: // a seq that did not grow (core.Beats, run by Conn.Heartbeat)
		a.env.metrics.ClientRestarts.Inc()
	case connDrift, connActivity, connStateSync, lapseDue, syncDue:
		a.onState(ctx, m, now)
	case checkTick:
		a.onCheck(ctx, now)
	case tokenExpired:
		a.out.sock.Close(messages.CloseTokenExpired, "token expired: reconnect with a new token")
	case renewDue:
		a.onRenewDue(ctx)
	case reregister:
		a.onReregister(ctx)
	case reregisterDue:
		a.onReregisterDue(ctx, m)
	case reregistered:
		a.onReregistered(ctx, m)
	case connClosed:
		a.end(ctx, messages.EndReason_close, now, 0, "")
	case *messages.ConnLost:
		a.onLost(ctx, m)
	case connSubscribe:
		a.subscribe(ctx, m)
	case connQuery:
		a.query(ctx, m)
	case batchFlush:
		a.onBatchFlush(ctx)
	case connUnsubscribe:
		a.onUnsubscribe(ctx, m)
	case connShow:
		a.status = &messages.DeviceShow{User: a.user, Device: a.device, Show: m.show, Text: m.text, ExpiresMs: m.expiresMs, SetAtMs: now.UnixMilli()}
		a.env.post.send(KindView, a.user, a.status)
	case *messages.ConnStatus:
		a.heardStatus(m)
	case *messages.SnapshotPart:
		a.onSnapshotPart(ctx, m)
	case *messages.PresenceEvent:
		a.onEvent(ctx, m.GetPresence())
	case connOverflow:
		a.overflow(ctx)
	case *actor.Stopping:
		a.onStopping(ctx, now)
	case *actor.Restarting: // a panic: the new instance starts with an empty sink
		a.onRestarting(ctx)
	}
}

// onUnsubscribe drops the targets from the sink and tells their views.
func (a *connActor) onUnsubscribe(ctx actor.Context, m connUnsubscribe) {
	a.out.mu.Lock()
	dropped := a.out.sink.Unsubscribe(m.targets)
	a.out.mu.Unlock()
	a.unsubscribe(ctx, dropped)
}

// onRestarting leaves the instance that replaces this one its birth and
// stops what it arms anew.
func (a *connActor) onRestarting(ctx actor.Context) {
	a.env.births.leave(ctx.Self().GetId(), a.rebirth())
	a.unhub(ctx)
	a.renew.stop()
	a.rereg.stop()
	a.dev.stop()
	if a.active {
		a.dev.count(a.env.metrics, -1) // the new instance counts itself
	}
}

// onEvent passes a view's event on, unless a member this node declared
// dead sent it (Node.dropStale). Events come this way only from a view of
// an earlier version, or for a connection the fan-out does not know yet
// (sinkHub.deliver); the fan-out writes the others.
func (a *connActor) onEvent(ctx actor.Context, p *messages.Presence) {
	if a.env.stale.dropStale(ctx, p.GetUser()) {
		return
	}
	n, ok := a.out.event(p, nil)
	a.env.frames.Add(float64(n))
	if !ok {
		a.overflow(ctx)
	}
}

func (a *connActor) onSnapshotPart(ctx actor.Context, m *messages.SnapshotPart) {
	a.out.mu.Lock()
	ok := a.out.sendLocked(a.out.sink.SnapshotPart(m.GetRequestId(), m.GetTarget(), m.GetVisible(), m.GetPresence()))
	a.out.armLocked() // events held for the snapshot, of batched targets
	a.out.mu.Unlock()
	if !ok {
		a.overflow(ctx)
	}
}

// overflow ends a connection whose device stopped reading: its queue is
// dropped, and it reconnects and resubscribes; no sender waits for it.
func (a *connActor) overflow(ctx actor.Context) {
	a.end(ctx, messages.EndReason_close, time.Now(), messages.CloseOverflow, "outbox overflow")
}

// onCheck ends a connection whose device went silent for longer than stale.
func (a *connActor) onCheck(ctx actor.Context, now time.Time) {
	// After a stall of this node the next check decides: the heartbeats of
	// the stall are still being read.
	if !a.env.guard.gate(ctx, gate{}) {
		return
	}
	a.c.Alive(time.Unix(0, a.live.alive.Load())) // the socket's last sign of life
	if a.active && a.c.Stale(now, a.live.stale) {
		a.env.metrics.HalfOpen.WithLabelValues(platformLabel(a.dev.Platform)).Inc()
		a.end(ctx, messages.EndReason_ping_timeout, a.c.LastAlive, messages.CloseGoingAway, "ping timeout")
	}
}

func (a *connActor) onRenewDue(ctx actor.Context) {
	if a.ended {
		return
	}
	a.env.post.send(KindLease, leaseID(a.user, a.device), &messages.LeaseRenew{User: a.user, Device: a.device, Holder: a.holder()})
	a.armRenew(ctx, false)
}

func (a *connActor) armRenew(ctx actor.Context, first bool) {
	a.renew.arm(a.env.sched, core.RenewDelay(a.rng, a.env.timing.Renew, a.env.timing.RenewJitter, first), ctx.Self(), renewDue{})
}

// onReregister waits until the change has reached every member (so all
// route alike), spread over half a renewal so a topology change is not a
// storm. A re-register armed for an earlier change is not postponed: when
// each change pushed it on, a cascade of them less than a propagation and
// a spread apart (a 2+2+1 split declares members dead one by one) held it
// back to the last, past the settle of a view re-created at the first,
// which then showed the device offline until it came. It goes out when
// due and is armed again if a change came less than a propagation before
// (onReregisterDue): at most about two per change.
func (a *connActor) onReregister(ctx actor.Context) {
	if !a.reregArmed {
		a.armReregister(ctx, a.env.propagation)
	}
}

// onReregisterDue sends the armed re-register, and arms another if the
// membership changed less than a propagation ago: the members that place
// by that change may not all have heard of it yet.
func (a *connActor) onReregisterDue(ctx actor.Context, m reregisterDue) {
	if m.gen != a.reregGen {
		return
	}
	a.reregArmed = false
	a.reregisterNow(ctx)
	if left := a.env.propagation - time.Since(a.env.place.lastChange()); left > 0 {
		a.armReregister(ctx, left)
	}
}

// armReregister re-registers after wait plus a random spread over half a
// renewal, replacing a re-register armed or sent before (its answer is
// then ignored).
func (a *connActor) armReregister(ctx actor.Context, wait time.Duration) {
	a.reregGen++
	a.reregTries = 0
	a.reregArmed = true
	spread := time.Duration(a.rng.Float64() * float64(a.env.timing.Renew/2))
	a.rereg.arm(a.env.sched, wait+spread, ctx.Self(), reregisterDue{a.reregGen})
}

// onLost closes a connection whose lease went to another one (or was
// reclaimed): it releases nothing, the lease is someone else's.
func (a *connActor) onLost(ctx actor.Context, m *messages.ConnLost) {
	if m.GetEpoch() != a.epoch || a.ended {
		return
	}
	a.ended = true
	code := messages.CloseGoingAway
	if m.GetReason() == messages.EndReason_superseded {
		code = messages.CloseSuperseded
	}
	a.closeOut()
	a.out.sock.Close(code, m.GetReason().String())
	ctx.Stop(ctx.Self())
}

// onStopping unsubscribes everywhere and, on a graceful stop (not a
// crash), releases the lease and closes the socket.
func (a *connActor) onStopping(ctx actor.Context, now time.Time) {
	a.env.index.remove(leaseID(a.user, a.device), ctx.Self())
	a.unhub(ctx)
	a.renew.stop()
	a.rereg.stop()
	a.dev.stop()
	if a.active {
		a.dev.count(a.env.metrics, -1)
	}
	a.out.mu.Lock()
	targets := make([]string, 0, len(a.out.sink.Targets()))
	for target := range a.out.sink.Targets() {
		targets = append(targets, target)
	}
	a.out.mu.Unlock()
	a.unsubscribe(ctx, targets)
	if a.active && !a.ended && !a.g.crashed.Load() {
		a.release(messages.EndReason_close, now)
		a.out.sock.Close(messages.CloseGoingAway, "node stopping")
	}
}

func (a *connActor) unsubscribe(ctx actor.Context, targets []string) {
	for _, target := range targets {
		a.env.post.send(KindView, target, &messages.ViewUnsubscribe{Target: target, Sink: refOf(ctx.Self())})
	}
}

// reregisterNow tells the (possibly re-created) lease and views about this
// live connection: the lease re-announces the device to its view, the views
// take this sink back without a snapshot, and the show is set again. It
// waits for nothing: the lease's answer comes back as reregistered.
func (a *connActor) reregisterNow(ctx actor.Context) {
	if !a.active || a.ended {
		return
	}
	self, gen := ctx.Self(), a.reregGen
	acq := &messages.LeaseAcquire{User: a.user, Device: a.device, Holder: a.holder()}
	a.env.post.request(KindLease, leaseID(a.user, a.device), acq, a.reregTimeout(), func(res any, err error) {
		a.env.root.Send(self, reregistered{gen: gen, res: res, err: err})
	})
	a.out.mu.Lock()
	subs := make([]*messages.ViewSubscribe, 0, len(a.out.sink.Targets()))
	for target, last := range a.out.sink.Targets() {
		subs = append(subs, &messages.ViewSubscribe{Target: target, Viewer: a.user, Sink: refOf(self), Reattach: true, Last: last})
	}
	dropped := a.out.sink.DropQueries() // a view asked may have died: never answered
	a.out.mu.Unlock()
	for _, id := range dropped {
		a.send(ctx, &messages.Frame{Kind: &messages.Frame_Error{Error: &messages.Error{Code: uint32(messages.ErrAgain), RequestId: id,
			Message: "query: the cluster's membership changed before every answer came: ask again"}}})
	}
	for _, s := range subs {
		a.env.post.send(KindView, s.GetTarget(), s)
	}
	if a.status != nil {
		replay := proto.CloneOf(a.status)
		replay.User, replay.Device, replay.Replay = a.user, a.device, true
		a.env.post.send(KindView, a.user, replay)
	}
}

// heardStatus keeps the user's status the view told this connection if
// it is not older than the one it has (by set_at_ms, the view's order).
func (a *connActor) heardStatus(m *messages.ConnStatus) {
	st := m.GetStatus()
	if m.GetEpoch() != a.epoch || st == nil || a.status != nil && st.GetSetAtMs() < a.status.GetSetAtMs() {
		return
	}
	a.status = st
}

// reregTimeout bounds the wait for the lease's answer to a re-register: a
// renewal interval, at most 5 s.
func (a *connActor) reregTimeout() time.Duration { return min(a.env.timing.Renew, 5*time.Second) }

// onReregistered tries a re-register that got no answer (its owner died,
// or no member hosts the identity yet) again after a back-off, unless one
// armed after it was sent replaced it (its answer is then ignored); a
// later change does not postpone the retry (onReregister). A refusal is
// not retried: the lease went to a newer connection, and the next renewal
// hears so (ConnLost).
func (a *connActor) onReregistered(ctx actor.Context, m reregistered) {
	if m.gen != a.reregGen || a.ended || m.err == nil {
		return
	}
	a.reregTries++
	wait := core.Backoff(a.rng, a.env.timing.Check, a.env.timing.Renew/2, a.reregTries)
	a.env.log.Debug("connection: re-register failed, retrying", "conn", a.id, "tries", a.reregTries, "wait", wait, "err", m.err)
	a.reregArmed = true
	a.rereg.arm(a.env.sched, wait, ctx.Self(), reregisterDue{a.reregGen})
}

func (a *connActor) holder() *messages.Holder {
	h := &messages.Holder{Node: a.g.node, ConnId: a.id, Epoch: a.epoch, Gateway: refOf(a.g.pid), SinceMs: a.since.UnixMilli()}
	a.dev.Fill(h)
	return h
}

func (a *connActor) release(reason messages.EndReason, lastAlive time.Time) {
	a.ended = true
	rel := &messages.LeaseRelease{
		User: a.user, Device: a.device, ConnId: a.id, Epoch: a.epoch, Reason: reason, LastAliveMs: lastAlive.UnixMilli(),
	}
	a.env.post.send(KindLease, leaseID(a.user, a.device), rel)
	if a.env.timing.FailureDetection > 0 { // members can die: keep it for a replay
		a.env.root.Send(a.g.pid, released{rel: rel, at: time.Now()})
	}
}

// end releases the lease with reason, closes the socket (code 0: it is
// closed already) and stops the actor.
func (a *connActor) end(ctx actor.Context, reason messages.EndReason, lastAlive time.Time, code messages.CloseCode, why string) {
	if a.ended {
		return
	}
	if a.active {
		a.release(reason, lastAlive)
	}
	a.ended = true
	a.closeOut()
	if code != 0 {
		a.out.sock.Close(code, why)
	}
	ctx.Stop(ctx.Self())
}

// closeOut stops the fan-out's writes to an ended connection.
func (a *connActor) closeOut() {
	a.out.mu.Lock()
	a.out.closed = true
	a.out.stopBatchLocked()
	a.out.mu.Unlock()
}

// send writes one frame of the actor's own (an error frame).
func (a *connActor) send(ctx actor.Context, f *messages.Frame) {
	a.out.mu.Lock()
	ok := a.out.sendLocked([]*messages.Frame{f})
	a.out.mu.Unlock()
	if !ok {
		a.overflow(ctx)
	}
}

// refuse answers a refused request with an error frame: 400, or code when
// err is limitErr (counted as limit).
func (a *connActor) refuse(ctx actor.Context, requestID string, err, limitErr error, code messages.ErrorCode, limit string) {
	c := messages.ErrBadRequest
	if errors.Is(err, limitErr) {
		c = code
		a.env.metrics.Refused.WithLabelValues(limit).Inc()
	}
	a.send(ctx, &messages.Frame{Kind: &messages.Frame_Error{Error: &messages.Error{
		Code: uint32(c), RequestId: requestID, Message: err.Error(),
	}}})
}

// subscribe asks each target's view for its part of the snapshot, or
// answers a bad request (400) or one over the connection's subscription
// limit (413) with an error frame.
func (a *connActor) subscribe(ctx actor.Context, m connSubscribe) {
	a.out.mu.Lock()
	targets, err := a.out.sink.Subscribe(m.requestID, m.targets, m.tier)
	var degraded *messages.Frame
	if err == nil && m.tier == messages.Tier_batched {
		a.batchedLocked(ctx.Self())
		degraded = a.degradeNewLocked(targets)
	}
	a.out.mu.Unlock()
	if err == nil && !a.hubbed { // before any view knows the sink
		a.hubbed = true
		a.env.hub.add(ctx.Self(), &a.out)
	}
	if degraded != nil {
		a.send(ctx, degraded)
	}
	if err != nil {
		a.refuse(ctx, m.requestID, err, core.ErrTooManySubscriptions, messages.ErrTooManySubscriptions, LimitSubscriptions)
		return
	}
	for _, target := range targets {
		a.env.post.send(KindView, target, &messages.ViewSubscribe{Target: target, Viewer: a.user, Sink: refOf(ctx.Self()), RequestId: m.requestID})
	}
}
