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
func (a *viewActor) hook(now time.Time) {
	if a.n.deps.Changes == nil || a.v.Unsettled || a.v.Version == 0 {
		return
	}
	ev := a.hookEvent(now)
	if sig := ev.Sig(); sig != a.hooked {
		a.hooked = sig
		a.n.deps.Changes.Changed(ev)
	}
}

// hookEvent is the user's untrimmed state as the backend receives it.
func (a *viewActor) hookEvent(now time.Time) webhook.Event {
	ev := webhook.Event{User: a.user, Status: "offline", Version: a.v.Version, AtMs: now.UnixMilli(), Devices: []webhook.Device{}}
	if a.v.Online {
		p := a.v.Presence(now)
		ev.Status, ev.Show, ev.StatusText = "online", p.Show.String(), p.Text
	} else if !a.v.LastSeen.IsZero() {
		ev.Reason, ev.LatencyMs = a.mode, now.Sub(a.v.LastSeen).Milliseconds()
	}
	for dev, d := range a.v.Devices.Sorted() {
		ev.Devices = append(ev.Devices, webhook.Device{Device: dev, Platform: core.PlatformOf(d.Holder).String(), Activity: core.ActivityOf(d.Holder).String(), Node: d.GetNode()})
	}
	return ev
}
