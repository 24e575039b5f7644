package core

import "time"

// Degrader is a node's choice between pushing its batched subscriptions
// and degrading them to pull (seed 004 §4.3): it enters degraded mode when
// the fan-out backlog reaches At, and leaves it only once the backlog has
// stayed under Below for RestoreAfter (hysteresis: a backlog hovering
// around one threshold does not flip the mode at every sample).
type Degrader struct {
	At           time.Duration // enter at a backlog of at least this
	Below        time.Duration // leave once under this ...
	RestoreAfter time.Duration // ... for this long
	// Degraded and Since are the mode and when it was entered.
	Degraded bool
	Since    time.Time
	calm     time.Time // when the backlog went under Below, degraded (zero: not under)
}

// Change is what an Observe decides.
type Change int

const (
	// Stay: the mode does not change.
	Stay Change = iota
	// Degrade: push stopped for batched subscriptions; tell them to pull.
	Degrade
	// Restore: push is back; send the degraded targets' state.
	Restore
)

// Observe takes one reading of the backlog (the age of the oldest
// fan-out event not yet written, or the longest one written since the
// last reading) and says whether the mode changes.
func (d *Degrader) Observe(backlog time.Duration, now time.Time) Change {
	if !d.Degraded {
		if backlog >= d.At {
			d.Degraded, d.Since, d.calm = true, now, time.Time{}
			return Degrade
		}
		return Stay
	}
	if backlog >= d.Below {
		d.calm = time.Time{}
		return Stay
	}
	if d.calm.IsZero() {
		d.calm = now
	}
	if now.Sub(d.calm) >= d.RestoreAfter {
		d.Degraded, d.calm = false, time.Time{}
		return Restore
	}
	return Stay
}
