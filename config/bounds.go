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
	if t.FailureDetection > 0 {
		b.OwnerCrash = t.FailureDetection + t.Settle + t.Debounce
	}
	return b
}
