package core

import (
	"errors"
	"time"

	"github.com/presence-im/presence/messages"
)

var (
	// ErrStaleAttempt refuses a handshake whose attempt is not greater than
	// the highest attempt ever accepted for the device (HTTP 409).
	ErrStaleAttempt = errors.New("core: attempt not greater than the device's attempt floor")
	// ErrStaleEpoch refuses a renew, re-register or release from a
	// connection that no longer holds the lease.
	ErrStaleEpoch = errors.New("core: stale epoch")
)

// Timer asks the owner to deliver a timer message tagged Gen at At. A
// cancelled timer's message may still arrive: the state machine ignores a
// Gen that is not its current one.
type Timer struct {
	At  time.Time
	Gen uint64
}

// Lease is one (user, device) lease, owned by its leaseActor. The epoch of a
// connection is the device's own connection attempt number, which only
// grows; so the lease stays monotonic even when its actor is re-created empty
// elsewhere and its floor reloaded.
type Lease struct {
	Holder    *messages.Holder // nil when no connection holds the lease
	Floor     uint64           // highest epoch ever accepted; kept after the lease ends
	RenewedAt time.Time
	ExpiresAt time.Time
	Gen       uint64 // generation of the pending expiry timer

	Ended       bool   // the last holder's lease ended (it is not live)
	EndedEpoch  uint64 // epoch of the last holder, once the lease ended
	EndedReason messages.EndReason

	RejectedStale uint64 // refused acquires, renews and releases

	// Unfenced accepts a release from any connection of the device. It
	// exists only for the negative-control test that shows what epoch
	// fencing prevents; nothing else sets it.
	Unfenced bool
}

// LeaseResult is what a lease operation asks its owner to do.
type LeaseResult struct {
	Err        error // the request was refused (nothing changed but the counter)
	Up         bool  // publish DeviceUp with the (new) holder
	Down       bool  // publish DeviceDown with Reason and LastAlive
	Reason     messages.EndReason
	LastAlive  time.Time
	Superseded *messages.Holder // an older holder to close with ConnLost{superseded}
	// Changed: the holder's declared state changed (a renewal carried a
	// newer one): tell the view with DeviceUp, no transition to count.
	Changed bool
	Expiry  *Timer // (re)arm the expiry timer
}

// Acquire claims the lease for holder h. A handshake must carry an epoch
// above the floor (a late, older handshake is refused with ErrStaleAttempt).
// A re-register of a live connection (handshake false, after an owner
// failover) may repeat the current epoch; from the current holder itself it
// is a renewal that reports Up again. A newer holder supersedes the old.
func (l *Lease) Acquire(h *messages.Holder, handshake bool, now time.Time, ttl time.Duration) LeaseResult {
	switch {
	case !handshake && l.holds(h):
		// The holder re-registering (after the view may have moved): a
		// renewal that announces the device again.
		res := l.Renew(h, now, ttl)
		res.Up = true
		return res
	case handshake && h.GetEpoch() <= l.Floor:
		l.RejectedStale++
		return LeaseResult{Err: ErrStaleAttempt}
	case !handshake && !l.mayHold(h):
		l.RejectedStale++
		return LeaseResult{Err: ErrStaleEpoch}
	}
	return l.take(h, now, ttl)
}

// Renew extends the lease of its holder by ttl. A renew from the holder of a
// lease that expired (a gateway that was slow, not dead) revives it; a renew
// from anything older than the current holder is refused.
//
// A renewal carries the device's declared state (messages.Holder): a
// newer one replaces the holder's and reports Changed, so the view hears
// of it.
func (l *Lease) Renew(h *messages.Holder, now time.Time, ttl time.Duration) LeaseResult {
	if l.holds(h) {
		l.RenewedAt = now
		res := LeaseResult{Expiry: l.arm(now, ttl)}
		if h.GetStateGen() > l.Holder.GetStateGen() {
			l.Holder, res.Changed = h, true
		}
		return res
	}
	if !l.mayHold(h) {
		l.RejectedStale++
		return LeaseResult{Err: ErrStaleEpoch}
	}
	return l.take(h, now, ttl)
}

// holds reports whether h is the current holder.
func (l *Lease) holds(h *messages.Holder) bool {
	return l.Holder != nil && l.Holder.GetConnId() == h.GetConnId() && l.Holder.GetEpoch() == h.GetEpoch()
}

// mayHold reports whether h may become the holder without a handshake: its
// epoch is at least the floor and above the current holder's, and its epoch
// did not already end for a reason other than expiry (a closed, timed-out,
// reclaimed or superseded connection never comes back).
func (l *Lease) mayHold(h *messages.Holder) bool {
	e := h.GetEpoch()
	if e < l.Floor || (l.Holder != nil && e <= l.Holder.GetEpoch()) {
		return false
	}
	ended := l.Holder == nil && l.Ended && l.EndedEpoch == e
	return !ended || l.EndedReason == messages.EndReason_lease_expired
}

func (l *Lease) take(h *messages.Holder, now time.Time, ttl time.Duration) LeaseResult {
	res := LeaseResult{Up: true}
	if prev := l.Holder; prev != nil && prev.GetConnId() != h.GetConnId() {
		res.Superseded = prev
	}
	l.Holder = h
	l.Floor = max(l.Floor, h.GetEpoch())
	l.Ended, l.EndedEpoch, l.EndedReason = false, 0, messages.EndReason_end_reason_unspecified
	l.RenewedAt = now
	res.Expiry = l.arm(now, ttl)
	return res
}

func (l *Lease) arm(now time.Time, ttl time.Duration) *Timer {
	l.Gen++
	l.ExpiresAt = now.Add(ttl)
	return &Timer{At: l.ExpiresAt, Gen: l.Gen}
}

// Release ends the lease if connID and epoch name the current holder; a late
// release from an older connection is refused and counted, and the newer
// holder keeps the lease.
func (l *Lease) Release(connID string, epoch uint64, reason messages.EndReason, lastAlive time.Time) LeaseResult {
	if l.Holder == nil && !l.Ended && epoch > 0 && epoch >= l.Floor {
		// Re-created empty (its member died, or it moved) before its holder
		// re-registered: the release of the newest connection still ends
		// the device, or its view would keep it online.
		l.Ended, l.EndedEpoch, l.EndedReason = true, epoch, reason
		l.Floor = max(l.Floor, epoch)
		l.Gen++
		return LeaseResult{Down: true, Reason: reason, LastAlive: lastAlive}
	}
	if l.Holder == nil && l.Ended && l.EndedEpoch == epoch && l.EndedReason == messages.EndReason_lease_expired {
		// Its own release after the lease expired (the device was reported
		// gone then): nothing to publish, but the epoch is now over for good,
		// so a renewal of it still on its way cannot revive the lease (the
		// connection's messages to its lease may arrive out of order).
		l.EndedReason = reason
		return LeaseResult{}
	}
	stale := l.Holder == nil || l.Holder.GetEpoch() != epoch || l.Holder.GetConnId() != connID
	if stale && !(l.Unfenced && l.Holder != nil) {
		l.RejectedStale++
		return LeaseResult{Err: ErrStaleEpoch}
	}
	return l.end(reason, lastAlive)
}

// Expire is the expiry timer firing. It ends the lease only if gen is the
// current timer and now is not before the last renewal plus TTL: a lease is
// never expired early.
func (l *Lease) Expire(gen uint64, now time.Time) LeaseResult {
	if gen != l.Gen || l.Holder == nil || now.Before(l.ExpiresAt) {
		return LeaseResult{}
	}
	return l.end(messages.EndReason_lease_expired, l.RenewedAt)
}

// GatewayDown reclaims the lease if its holder is on the dead node. The
// device was last alive at the later of its last renewal and lastHeard,
// when this member last heard from that node (zero: unknown): both are
// signs of life before the crash.
func (l *Lease) GatewayDown(node string, lastHeard time.Time) LeaseResult {
	return l.GatewayDownBefore(node, time.Time{}, lastHeard)
}

// GatewayDownBefore is GatewayDown for a holder whose connection the node
// opened before `before` only (zero: any; see View.GatewayDownBefore).
func (l *Lease) GatewayDownBefore(node string, before, lastHeard time.Time) LeaseResult {
	if l.Holder == nil || l.Holder.GetNode() != node || !OpenedBefore(l.Holder, before) {
		return LeaseResult{}
	}
	last := l.RenewedAt
	if lastHeard.After(last) {
		last = lastHeard
	}
	return l.end(messages.EndReason_gateway_down, last)
}

func (l *Lease) end(reason messages.EndReason, lastAlive time.Time) LeaseResult {
	l.Ended, l.EndedEpoch, l.EndedReason = true, l.Holder.GetEpoch(), reason
	l.Holder = nil
	l.Gen++ // a pending expiry timer is now stale
	return LeaseResult{Down: true, Reason: reason, LastAlive: lastAlive}
}

// Live reports whether a connection holds the lease.
func (l *Lease) Live() bool { return l.Holder != nil }

// OpenedBefore reports whether h's connection opened before `before` (zero:
// always), both on the holder node's own clock; a holder with no opening
// time counts as opened before.
func OpenedBefore(h *messages.Holder, before time.Time) bool {
	ms := h.GetSinceMs()
	return before.IsZero() || ms == 0 || ms < before.UnixMilli()
}
