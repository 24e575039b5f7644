package actors

import (
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/webhook"
)

// hook tells the node's ChangeSink (the webhooks) of the user's change, if
// what the backend sees of the user changed since the view last told it:
// its status, derived show, text or devices. A view that never published
// has nothing to tell; an unsettled one waits for its devices to
// re-register (it tells what is true at its settle, a duplicate of what
// the old view told the backend at worst: same state, a higher version).
// Each change it tells has a version of its own: one that changed nothing
// subscribers see (a device's node) raises the view's version first, so a
// receiver keeping the highest version per user keeps the latest state.
func (a *viewActor) hook(now time.Time) {
	if a.env.changes == nil || a.v.Unsettled || a.v.Version == 0 {
		return
	}
	ev := a.hookEvent(now)
	sig := ev.Sig()
	if sig == a.hooked {
		return
	}
	if a.v.Version <= a.hookedAt {
		a.v.Raise(max(a.hookedAt+1, uint64(now.UnixMilli())))
		ev.Version = a.v.Version
	}
	a.hooked, a.hookedAt = sig, ev.Version
	a.env.changes.Changed(ev)
}

// hookEvent is the user's untrimmed state as the backend receives it.
func (a *viewActor) hookEvent(now time.Time) webhook.Event {
	ev := webhook.Event{User: a.user, Status: "offline", Version: a.v.Version, AtMs: now.UnixMilli(), Devices: []webhook.Device{}}
	if a.v.Online {
		p := a.v.Presence(now)
		ev.Status, ev.Show, ev.StatusText = "online", p.Show.String(), p.Text
	} else {
		ev.Reason = a.mode
		if a.mode != ModeOwnerCrash && !a.v.LastSeen.IsZero() { // an owner crash took the departure with it
			ev.LatencyMs = now.Sub(a.v.LastSeen).Milliseconds()
		}
	}
	for dev, d := range a.v.Devices.Sorted() {
		ev.Devices = append(ev.Devices, webhook.Device{Device: dev, Platform: core.PlatformOf(d.Holder).String(), Activity: core.ActivityOf(d.Holder).String(), Node: d.GetNode()})
	}
	return ev
}
