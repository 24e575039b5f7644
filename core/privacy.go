package core

import (
	"time"

	"github.com/presence-im/presence/messages"
)

// Granularity is how much of a user's presence its contacts may see.
type Granularity string

const (
	Exact  Granularity = "exact"  // online/offline and the last-seen minute
	Coarse Granularity = "coarse" // online, recently (within 24 h) or long_ago
	Hidden Granularity = "hidden" // unknown
)

// RecentWindow is where coarse "recently" ends and "long_ago" begins.
const RecentWindow = 24 * time.Hour

// Policy is a user's privacy policy. A user with no policy (nil) is visible
// to nobody but itself.
type Policy struct {
	Granularity Granularity
	Contacts    map[string]bool
	Blocked     map[string]bool // wins over Contacts
	HiddenFrom  map[string]bool // contacts that see "unknown"
	CoarseFor   map[string]bool // contacts that see coarse where the others see exact
}

// Presence is the untrimmed state of a user that trimming works from.
type Presence struct {
	User   string
	Online bool
	// LastSeen is the last departure others may know (zero: none): an
	// invisible user's real departures stay hidden, so for others it stops
	// at the moment the user went invisible, when they saw it go offline.
	LastSeen time.Time
	// Show is the derived show (Derive); invisible looks offline to others.
	Show messages.Show
	// OwnLastSeen is the real last departure, which only the user sees
	// (zero: same as LastSeen).
	OwnLastSeen time.Time
	// While online: the platforms with their activity and the idle time
	// (exact viewers), the status text (exact and coarse viewers).
	Devices   []*messages.DevicePresence
	IdleSince time.Time
	Text      string
}

// Trim returns what viewer may see of p, or nil when viewer may see nothing:
// no policy, not a contact, or blocked. Nil is distinct from offline, so a
// blocked viewer cannot tell it was blocked. Times leave as whole minutes.
func Trim(pol *Policy, viewer string, p Presence, now time.Time) *messages.Presence {
	g, ok := Grant(pol, viewer, p.User)
	if !ok {
		return nil
	}
	return Render(g, viewer == p.User, p, now)
}

// Grant is the granularity at which viewer may see user's presence under
// pol; false: nothing (no policy, not a contact, or blocked). A user sees
// itself exactly.
func Grant(pol *Policy, viewer, user string) (Granularity, bool) {
	switch {
	case viewer == user:
		return Exact, true
	case pol == nil || pol.Blocked[viewer] || !pol.Contacts[viewer]:
		return "", false
	case pol.HiddenFrom[viewer]:
		return Hidden, true
	case pol.CoarseFor[viewer] && pol.Granularity == Exact:
		return Coarse, true
	}
	return pol.Granularity, true
}

// Render is p as a viewer granted g sees it; self: the viewer is the user
// (it sees itself as it is, its own last seen included). What Trim returns
// depends on nothing else, so viewers alike can share one rendering
// (View.publish).
func Render(g Granularity, self bool, p Presence, now time.Time) *messages.Presence {
	out := &messages.Presence{User: p.User, Status: messages.Status_unknown}
	online := p.Online && p.Show != messages.Show_invisible
	if self {
		online = p.Online
		if !p.OwnLastSeen.IsZero() {
			p.LastSeen = p.OwnLastSeen
		}
	}
	switch {
	case g == Hidden:
	case online:
		out.Status, out.Show, out.StatusText = messages.Status_online, p.Show, p.Text
		if g == Exact {
			out.Devices = p.Devices // shared, read-only as the presence is
			if !p.IdleSince.IsZero() {
				out.IdleSinceMinute = uint32(p.IdleSince.Unix() / 60)
			}
		}
	case g == Exact:
		out.Status = messages.Status_offline
		if !p.LastSeen.IsZero() {
			out.LastSeenMinute = uint32(p.LastSeen.Unix() / 60)
		}
	case !p.LastSeen.IsZero() && now.Sub(p.LastSeen) <= RecentWindow:
		out.Status = messages.Status_recently
	default:
		out.Status = messages.Status_long_ago
	}
	return out
}
