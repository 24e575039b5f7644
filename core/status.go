package core

import (
	"cmp"
	"fmt"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/presence-im/presence/messages"
)

// MaxStatusText bounds a status text, in characters.
const MaxStatusText = 140

// UserStatus is what a user set with set_status: a show of its own
// (unspecified: none, the show is derived), a status text, until when
// (zero: until changed) and when it was set (the latest of the user's
// devices wins).
type UserStatus struct {
	Show  messages.Show
	Text  string
	Until time.Time
	At    time.Time
}

// Live is the status as it holds at now: nothing once it expired.
func (u UserStatus) Live(now time.Time) UserStatus {
	if !u.Until.IsZero() && !now.Before(u.Until) {
		return UserStatus{At: u.At}
	}
	return u
}

// ValidStatus checks a set_status: a show of the enum (auto clears the
// user's own), a text of at most MaxStatusText characters of valid UTF-8
// without control characters, an expiry that is not in the past.
func ValidStatus(show messages.Show, text string, expiresMs int64, now time.Time) error {
	switch {
	case show == messages.Show_show_unspecified || messages.Show_name[int32(show)] == "":
		return fmt.Errorf("%w: set_status: show must be available, away, dnd or invisible (or auto: derived again)", ErrBadState)
	case !utf8.ValidString(text):
		return fmt.Errorf("%w: set_status: text is not valid UTF-8", ErrBadState)
	case utf8.RuneCountInString(text) > MaxStatusText:
		return fmt.Errorf("%w: set_status: text has %d characters: at most %d", ErrBadState, utf8.RuneCountInString(text), MaxStatusText)
	case expiresMs < 0 || expiresMs > 0 && expiresMs <= now.UnixMilli():
		return fmt.Errorf("%w: set_status: expires_ms %d is not in the future (now %d)", ErrBadState, expiresMs, now.UnixMilli())
	}
	for _, r := range text {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: set_status: text holds control character %U", ErrBadState, r)
		}
	}
	return nil
}

// Derived is the user's status as others may see it while online.
type Derived struct {
	Show      messages.Show
	IdleSince time.Time // away for want of an active device: since when (zero otherwise)
	Text      string
}

// Derive is the user's status from what it set and its live devices
// (docs/protocol.md, "Status"): a show the user set wins; otherwise any
// active device makes the user available, and devices all idle or in the
// background make it away, idle since the last of them stopped being
// active. No device: available (an offline user shows no show).
func Derive(set UserStatus, devices []*messages.Holder, now time.Time) Derived {
	set = set.Live(now)
	d := Derived{Show: set.Show, Text: set.Text}
	if d.Show != messages.Show_show_unspecified && d.Show != messages.Show_auto {
		return d
	}
	d.Show = messages.Show_available
	if len(devices) == 0 {
		return d
	}
	if _, attended := Foreground(devices); attended {
		return d
	}
	for _, h := range devices {
		d.IdleSince = later(d.IdleSince, stoppedActive(h))
	}
	d.Show = messages.Show_away
	return d
}

// stoppedActive is when a device that is not active stopped being so:
// its last active, or since when it has been as it is if never active.
func stoppedActive(h *messages.Holder) time.Time {
	if ms := h.GetLastActiveMs(); ms > 0 {
		return time.UnixMilli(ms)
	}
	return time.UnixMilli(h.GetActivityAtMs())
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ActivityOf is a device's activity; a holder that carries none (from a
// node of an earlier version) is a connected device as it was before
// devices declared anything: active.
func ActivityOf(h *messages.Holder) messages.Activity {
	if a := h.GetActivity(); a != messages.Activity_activity_unspecified {
		return a
	}
	return messages.Activity_active
}

// activityRank orders activities by deliverability: active, idle,
// background, then anything else.
func activityRank(a messages.Activity) int {
	switch a {
	case messages.Activity_active:
		return 0
	case messages.Activity_idle:
		return 1
	case messages.Activity_background:
		return 2
	}
	return 3
}

// ByDeliverability orders two devices for message delivery: a device
// whose heartbeats drifted last; then active, idle, background; then the
// most recently active first (its last active, else since when it is as
// it is); then by name, so that the order is total.
func ByDeliverability(aName string, a *messages.Holder, bName string, b *messages.Holder) int {
	if c := cmpBool(a.GetDirty(), b.GetDirty()); c != 0 {
		return c
	}
	if c := cmp.Compare(activityRank(ActivityOf(a)), activityRank(ActivityOf(b))); c != 0 {
		return c
	}
	if c := cmp.Compare(recency(b), recency(a)); c != 0 {
		return c
	}
	return cmp.Compare(aName, bName)
}

func recency(h *messages.Holder) int64 { return max(h.GetLastActiveMs(), h.GetActivityAtMs()) }

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// Foreground reports whether some device is active or idle (false: none
// is in the foreground, so a vendor push is needed as well); Attended
// whether some device is active.
func Foreground(devices []*messages.Holder) (foreground, attended bool) {
	for _, h := range devices {
		switch ActivityOf(h) {
		case messages.Activity_active:
			return true, true
		case messages.Activity_idle:
			foreground = true
		}
	}
	return foreground, false
}

// Platforms are the platforms the user is online on, each with the most
// deliverable activity of its devices, ordered by platform: what exact
// viewers see (no device ids, no nodes, no count of devices).
func Platforms(devices []*messages.Holder) []*messages.DevicePresence {
	var out []*messages.DevicePresence
	for _, h := range devices {
		p, a := PlatformOf(h), ActivityOf(h)
		i := slices.IndexFunc(out, func(d *messages.DevicePresence) bool { return d.GetPlatform() == p })
		if i < 0 {
			out = append(out, &messages.DevicePresence{Platform: p, Activity: a})
		} else if activityRank(a) < activityRank(out[i].GetActivity()) {
			out[i].Activity = a
		}
	}
	slices.SortFunc(out, func(a, b *messages.DevicePresence) int { return cmp.Compare(a.GetPlatform(), b.GetPlatform()) })
	return out
}

// PlatformOf is a device's platform; none given is other.
func PlatformOf(h *messages.Holder) messages.Platform {
	if p := h.GetPlatform(); p != messages.Platform_platform_unspecified {
		return p
	}
	return messages.Platform_other
}

// SameState reports whether two holders of one connection carry the
// same declared state.
func SameState(a, b *messages.Holder) bool {
	return a.GetPlatform() == b.GetPlatform() && a.GetActivity() == b.GetActivity() && a.GetActivityAtMs() == b.GetActivityAtMs() &&
		a.GetLastActiveMs() == b.GetLastActiveMs() && a.GetDirty() == b.GetDirty()
}
