package webhook

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/presence-im/presence/messages"
)

// Event is one user's change as the backend receives it: the user's full,
// untrimmed state at Version (the backend sees the truth, not a viewer's
// copy), so the highest version per user is all a receiver keeps.
type Event struct {
	User       string   `json:"user"`
	Status     string   `json:"status"` // online or offline
	Version    uint64   `json:"version"`
	Show       string   `json:"show,omitempty"` // the derived show, while online
	StatusText string   `json:"status_text,omitempty"`
	Devices    []Device `json:"devices"`
	// Reason and LatencyMs: for an offline, how the last device left
	// (close, half_open, gateway_crash, owner_crash) and the time from its
	// departure to the offline.
	Reason    string `json:"reason,omitempty"`
	LatencyMs int64  `json:"latency_ms,omitempty"`
	AtMs      int64  `json:"at_ms"` // when the change was published (Unix ms)
}

// Device is one connected device of an event, in the order of delivery.
type Device struct {
	Device   string `json:"device"`
	Platform string `json:"platform"`
	Activity string `json:"activity"`
	Node     string `json:"node"`
}

// Batch is the body of one POST.
type Batch struct {
	Events []json.RawMessage `json:"events"`
}

// Sig is what of an event the backend must be told again when it
// changes: status, show, text, and each device with its state and node.
func (ev Event) Sig() string {
	var b strings.Builder
	b.WriteString(ev.Status + "|" + ev.Show + "|" + ev.StatusText)
	for _, d := range ev.Devices {
		b.WriteString("|" + d.Device + ":" + d.Platform + ":" + d.Activity + ":" + d.Node)
	}
	return b.String()
}

// eventOf is a view's state (a lookup's answer) as an event at now; its
// version is the view's.
func eventOf(st *messages.ViewState, now time.Time) Event {
	ev := Event{User: st.GetUser(), Status: "offline", Version: st.GetVersion(), AtMs: now.UnixMilli(), Devices: []Device{}}
	if st.GetOnline() {
		ev.Status, ev.Show, ev.StatusText = "online", st.GetShow().String(), st.GetStatusText()
	}
	for _, d := range st.GetDevices() {
		ev.Devices = append(ev.Devices, Device{Device: d.GetDevice(), Platform: d.GetPlatform().String(), Activity: d.GetActivity().String(), Node: d.GetNode()})
	}
	return ev
}
