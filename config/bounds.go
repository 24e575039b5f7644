package config

import "time"

// Bounds are the promised worst-case delays from a device's departure to its
// user's offline event reaching a subscriber, one per way of leaving. They
// are derived from a Timing, never written down as figures.
type Bounds struct {
	// GracefulClose: the gateway releases the lease at once; only the
	// debounce remains.
	GracefulClose time.Duration
	// HalfOpen: the last heartbeat came at most at departure; the connection
	// is stale Stale later and the next check sees it at most Check after
	// that; then the debounce.
	HalfOpen time.Duration
	// GatewayCrash: the last renewal came at most at the crash, so the lease
	// expires at most TTL later (expiry is a timer at renewal+TTL, not a
	// sweep); if the gossip layer declares the node dead sooner, its leases
	// are reclaimed then. Then the debounce.
	GatewayCrash time.Duration
	// MinLeaseLife is the lower bound: no lease ends by expiry earlier than
	// its last renewal plus this.
	MinLeaseLife time.Duration
	// OwnerCrash (clusters only): when the member that dies also hosted the
	// lease or view of its own devices, nothing survives to reclaim them;
	// the re-created view learns who re-registered within Settle and reports
	// the rest offline: failure detection + settle + debounce.
	OwnerCrash time.Duration
	// Battery is the battery heartbeat class's: its interval and stale are
	// BatteryFactor times the standard ones, so its half-open bound is
	// Stale x factor + Check + Debounce; every other bound is the same.
	Battery Class
}

// Class is a heartbeat class: the interval its devices beat at, the stale
// its connections are closed after, and its half-open bound.
type Class struct {
	Name      string
	Heartbeat time.Duration
	Stale     time.Duration
	HalfOpen  time.Duration
}

// Class names (the handshake's ?class=).
const (
	ClassStandard = "standard"
	ClassBattery  = "battery"
)

// Class is the named heartbeat class of these timings ("" is standard);
// false for a name that is none.
func (t Timing) Class(name string) (Class, bool) {
	switch name {
	case "", ClassStandard:
		return Class{ClassStandard, t.Heartbeat, t.Stale, t.Stale + t.Check + t.Debounce}, true
	case ClassBattery:
		f := time.Duration(t.BatteryFactor)
		return Class{ClassBattery, t.Heartbeat * f, t.Stale * f, t.Stale*f + t.Check + t.Debounce}, true
	}
	return Class{}, false
}

// Bounds computes the bounds of these timings.
func (t Timing) Bounds() Bounds {
	crash := t.TTL
	if t.FailureDetection > 0 && t.FailureDetection < crash {
		crash = t.FailureDetection
	}
	b := Bounds{
		GracefulClose: t.Debounce,
		HalfOpen:      t.Stale + t.Check + t.Debounce,
		GatewayCrash:  crash + t.Debounce,
		MinLeaseLife:  t.TTL,
	}
	b.Battery, _ = t.Class(ClassBattery)
	if t.FailureDetection > 0 {
		b.OwnerCrash = t.FailureDetection + t.Settle + t.Debounce
	}
	return b
}

// HandshakeWait bounds a handshake's wait for its lease and each store
// call (the store's calls of a node, store.StoreMetrics.Wait): Stale, at
// most 5 s. Less than nbio's read deadline on a request (twice Stale), so a
// handshake waiting on a slow or paused store gets its 503 and
// Retry-After, not a connection cut without an answer; a store call that
// cannot finish within it would not serve its handshake anyway.
func (t Timing) HandshakeWait() time.Duration { return min(5*time.Second, t.Stale) }
