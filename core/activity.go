package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/presence-im/presence/messages"
)

// ErrBadState is wrapped by a platform, activity, class or status that
// breaks the protocol's rules (error frame or handshake 400).
var ErrBadState = errors.New("core: bad device state")

// DeviceState is what one connection's device declared it is doing,
// owned by its connection actor (seed 002 §4: the client declares its
// state, the server never guesses it from silence). The only inference is
// the lapse: a declared active turns idle IdleAfter later unless the
// device declares active again, so a client that stops telling does not
// stay active for ever.
type DeviceState struct {
	Platform    messages.Platform
	Activity    messages.Activity
	At          time.Time // since when Activity holds
	LastActive  time.Time // when the device last declared active (zero: never)
	ActiveUntil time.Time // an active lapses to idle then
	Dirty       bool      // its heartbeats drifted: routed to last until a state sync
	Gen         uint64    // grows with every change (messages.Holder.state_gen)
}

// NewDeviceState is a connection's state at its handshake: the platform
// and the activity it connected with (?activity=). A device that declares
// none (a client of an earlier version) is active for as long as it is
// connected, as every device was before activities: it never lapses
// until it declares something.
func NewDeviceState(p messages.Platform, a messages.Activity, now time.Time, idleAfter time.Duration) DeviceState {
	d := DeviceState{Platform: p, Activity: a, At: now, LastActive: now, Gen: 1}
	switch a {
	case messages.Activity_activity_unspecified:
		d.Activity = messages.Activity_active
	case messages.Activity_active:
		d.ActiveUntil = now.Add(idleAfter)
	default:
		d.LastActive = time.Time{}
	}
	return d
}

// Declare sets the device's activity and reports whether anything its
// lease and view know changed. Declaring active again only moves the
// lapse (a renewal: nothing to tell).
func (d *DeviceState) Declare(a messages.Activity, now time.Time, idleAfter time.Duration) (changed bool) {
	if a == messages.Activity_active {
		d.LastActive, d.ActiveUntil = now, now.Add(idleAfter)
	}
	if a == d.Activity {
		return false
	}
	d.Activity, d.At = a, now
	d.Gen++
	return true
}

// Lapse turns an active whose time is up idle, from the moment it was
// due; it reports whether it did.
func (d *DeviceState) Lapse(now time.Time) bool {
	if _, ok := d.LapseAt(); !ok || now.Before(d.ActiveUntil) {
		return false
	}
	d.Activity, d.At = messages.Activity_idle, d.ActiveUntil
	d.Gen++
	return true
}

// LapseAt is when an active lapses (false: the device is not active, or
// never declared anything).
func (d *DeviceState) LapseAt() (time.Time, bool) {
	return d.ActiveUntil, d.Activity == messages.Activity_active && !d.ActiveUntil.IsZero()
}

// SetDirty marks or clears the drift and reports whether it changed.
func (d *DeviceState) SetDirty(dirty bool) bool {
	if d.Dirty == dirty {
		return false
	}
	d.Dirty = dirty
	d.Gen++
	return true
}

// Fill writes the state into a holder, as renewals and re-registers carry it.
func (d *DeviceState) Fill(h *messages.Holder) {
	h.Platform, h.Activity, h.Dirty, h.StateGen = d.Platform, d.Activity, d.Dirty, d.Gen
	h.ActivityAtMs = d.At.UnixMilli()
	h.LastActiveMs = 0
	if !d.LastActive.IsZero() {
		h.LastActiveMs = d.LastActive.UnixMilli()
	}
}

// ParsePlatform reads the handshake's ?platform= ("" is other).
func ParsePlatform(s string) (messages.Platform, error) {
	if s == "" {
		return messages.Platform_other, nil
	}
	if v, ok := messages.Platform_value[s]; ok && v != 0 {
		return messages.Platform(v), nil
	}
	return 0, fmt.Errorf("%w: platform %q: must be mobile, desktop, web or other", ErrBadState, s)
}

// ParseActivity reads an activity's name ("": none declared, see
// NewDeviceState).
func ParseActivity(s string) (messages.Activity, error) {
	if s == "" {
		return messages.Activity_activity_unspecified, nil
	}
	if v, ok := messages.Activity_value[s]; ok && v != 0 {
		return messages.Activity(v), nil
	}
	return 0, fmt.Errorf("%w: activity %q: must be active, idle or background", ErrBadState, s)
}

// ValidActivity checks a declared activity (set_activity, state_sync).
func ValidActivity(a messages.Activity) error {
	if a < messages.Activity_active || a > messages.Activity_background {
		return fmt.Errorf("%w: activity %v: must be active, idle or background", ErrBadState, a)
	}
	return nil
}
