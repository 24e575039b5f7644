package actors

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// devState is a connection's declared state (core.DeviceState) and what
// its actor keeps beside it: the heartbeat class, the lapse of a declared
// active, and a state sync under way (the drift fuse, seed 002 §4.3).
type devState struct {
	core.DeviceState
	class   string
	lapse   timer
	sync    timer
	nonce   string // of the state sync asked for ("": none)
	syncGen uint64
}

// Connection timer messages of the declared state.
type (
	lapseDue struct{ gen uint64 } // a declared active's time is up
	syncDue  struct{ gen uint64 } // the state sync's answer is late
)

// onState handles the messages of the declared state (connActor.Receive).
func (a *connActor) onState(ctx actor.Context, msg any, now time.Time) {
	switch m := msg.(type) {
	case connDrift:
		a.onDrift(ctx, m.Drift, now)
	case connActivity:
		a.onActivity(ctx, m.activity, now)
	case connStateSync:
		a.onStateSync(ctx, m, now)
	case lapseDue:
		a.onLapse(ctx, m, now)
	case syncDue:
		a.onSyncDue(ctx, m)
	}
}

func (d *devState) stop() {
	d.lapse.stop()
	d.sync.stop()
}

// count moves presence_device_connections by delta.
func (d *devState) count(m *Metrics, delta float64) {
	m.Connections.WithLabelValues(platformLabel(d.Platform), d.class).Add(delta)
}

// armLapse arms the timer of a declared active, tagged with the state's
// generation: any change since makes it stale.
func (a *connActor) armLapse(ctx actor.Context) {
	if at, ok := a.dev.LapseAt(); ok {
		a.dev.lapse.arm(a.env.sched, time.Until(at), ctx.Self(), lapseDue{a.dev.Gen})
	}
}

// tellState sends the lease the connection's new state at once, as a
// renewal: the lease hands it to the view (core.Lease.Renew), which
// derives what viewers see from it.
func (a *connActor) tellState(ctx actor.Context) {
	if a.active && !a.ended {
		a.env.post.send(KindLease, leaseID(a.user, a.device), &messages.LeaseRenew{User: a.user, Device: a.device, Holder: a.holder()})
	}
}

// onActivity takes a declared activity (set_activity): a change is told,
// a renewed active moves its lapse only.
func (a *connActor) onActivity(ctx actor.Context, act messages.Activity, now time.Time) {
	if a.dev.Declare(act, now, a.env.timing.IdleAfter) {
		a.tellState(ctx)
	}
	a.armLapse(ctx)
}

// onLapse turns an active whose time is up idle.
func (a *connActor) onLapse(ctx actor.Context, m lapseDue, now time.Time) {
	if m.gen != a.dev.Gen {
		return // declared again (or changed) since: a later lapse is armed
	}
	if a.dev.Lapse(now) {
		a.tellState(ctx)
		return
	}
	a.armLapse(ctx) // declared active again just now: not due yet
}

// onDrift marks the connection dirty (routed to last), asks the device
// for its state and gives it Timing.StateSync to answer. A fuse that
// trips while a sync is under way changes nothing.
func (a *connActor) onDrift(ctx actor.Context, d core.Drift, now time.Time) {
	if a.ended || !a.dev.SetDirty(true) {
		return
	}
	a.env.metrics.Fuses.WithLabelValues(platformLabel(a.dev.Platform), FuseTripped).Inc()
	a.env.log.Info("connection: heartbeats drifted: routed to last, state sync asked",
		"user", a.user, "device", a.device, "conn", a.id, "before", d.Before.String(), "after", d.After.String(), "cause", d.Cause)
	a.tellState(ctx)
	a.dev.nonce = newNonce()
	a.dev.syncGen++
	a.dev.sync.arm(a.env.sched, a.env.timing.StateSync, ctx.Self(), syncDue{a.dev.syncGen})
	a.send(ctx, &messages.Frame{Kind: &messages.Frame_StateSyncRequest{StateSyncRequest: &messages.StateSyncRequest{Nonce: a.dev.nonce}}})
}

// onStateSync takes the device's answer: with the nonce asked for, the
// connection is clean again with the activity it declares and its
// heartbeats start a new run; anything else is refused (400) and changes
// nothing.
func (a *connActor) onStateSync(ctx actor.Context, m connStateSync, now time.Time) {
	if a.dev.nonce == "" || m.nonce != a.dev.nonce {
		a.send(ctx, errorFrame(messages.ErrBadRequest, fmt.Sprintf("state_sync: nonce %q is not the one asked for", m.nonce)))
		return
	}
	a.dev.nonce = ""
	a.dev.syncGen++
	a.dev.sync.stop()
	a.live.mu.Lock()
	a.live.beats.Reset()
	a.live.mu.Unlock()
	a.dev.SetDirty(false)
	a.dev.Declare(m.activity, now, a.env.timing.IdleAfter)
	a.env.metrics.Fuses.WithLabelValues(platformLabel(a.dev.Platform), FuseSynced).Inc()
	a.tellState(ctx)
	a.armLapse(ctx)
}

// onSyncDue closes a connection that did not answer its state sync in
// time: 4409, the device authenticates again.
func (a *connActor) onSyncDue(ctx actor.Context, m syncDue) {
	if m.gen != a.dev.syncGen || a.dev.nonce == "" {
		return
	}
	a.env.metrics.Fuses.WithLabelValues(platformLabel(a.dev.Platform), FuseClosed).Inc()
	a.env.log.Info("connection: no state sync in time: closed", "user", a.user, "device", a.device, "conn", a.id, "waited", a.env.timing.StateSync)
	a.end(ctx, messages.EndReason_close, time.Unix(0, a.live.alive.Load()), messages.CloseStateSync, "state sync failed: authenticate again")
}

func errorFrame(code messages.ErrorCode, msg string) *messages.Frame {
	return &messages.Frame{Kind: &messages.Frame_Error{Error: &messages.Error{Code: uint32(code), Message: msg}}}
}

// newNonce is a state sync's nonce: 8 random bytes in hex.
func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
