package actors

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/webhook"
)

// hookSink records what the views tell the webhooks.
type hookSink struct {
	mu  sync.Mutex
	evs []webhook.Event
}

func (s *hookSink) Changed(ev webhook.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, ev)
}

func (s *hookSink) all() []webhook.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.evs)
}

func (s *hookSink) last(t *testing.T) webhook.Event {
	t.Helper()
	synctest.Wait()
	evs := s.all()
	if len(evs) == 0 {
		t.Fatal("the webhooks were told nothing")
	}
	return evs[len(evs)-1]
}

// The event a view tells the webhooks carries the user's untrimmed state:
// the derived show and her text while online, each device's platform,
// activity and node in the order of delivery, the departure's reason and
// latency for an offline, and the time of the change; every change has a
// version of its own, growing.
func TestHookPayload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		sink := &hookSink{}
		e := newEnvWith(t, Deps{Timing: timing, Changes: sink})
		at := time.Now()
		phone := e.openState("alice", "phone", messages.Platform_mobile, messages.Activity_background, "")
		laptop := e.openState("alice", "laptop", messages.Platform_desktop, messages.Activity_active, "")
		ev := sink.last(t)
		want := []webhook.Device{{Device: "laptop", Platform: "desktop", Activity: "active", Node: "g1"}, {Device: "phone", Platform: "mobile", Activity: "background", Node: "g1"}}
		if ev.User != "alice" || ev.Status != "online" || ev.Show != "available" || !slices.Equal(ev.Devices, want) || ev.AtMs != at.UnixMilli() || ev.Reason != "" {
			t.Fatalf("online with two devices: %+v, want available, the active laptop first, at %d", ev, at.UnixMilli())
		}
		time.Sleep(time.Second)
		at = time.Now()
		phone.conn.SetStatus(messages.Show_dnd, "in a meeting", 0)
		if ev = sink.last(t); ev.Show != "dnd" || ev.StatusText != "in a meeting" || ev.AtMs != at.UnixMilli() {
			t.Fatalf("status set: %+v, want dnd, the text, at %d", ev, at.UnixMilli())
		}
		laptop.close()
		if ev = sink.last(t); len(ev.Devices) != 1 || ev.Devices[0].Device != "phone" || ev.Status != "online" {
			t.Fatalf("the laptop gone: %+v, want the phone alone", ev)
		}
		left := time.Now()
		phone.close()
		time.Sleep(timing.Debounce)
		ev = sink.last(t)
		if ev.Status != "offline" || ev.Show != "" || ev.StatusText != "" || len(ev.Devices) != 0 || ev.Reason != ModeClose ||
			ev.LatencyMs <= 0 || ev.LatencyMs != ev.AtMs-left.UnixMilli() {
			t.Fatalf("offline: %+v, want reason close, latency from the departure at %d", ev, left.UnixMilli())
		}
		bob := e.openState("bob", "phone", messages.Platform_web, messages.Activity_idle, "")
		synctest.Wait()
		bobLeft := time.Now()
		bob.halt() // no word: the gateway finds it stale
		time.Sleep(timing.Stale + timing.Check + timing.Debounce)
		if ev = sink.last(t); ev.User != "bob" || ev.Reason != ModeHalfOpen || ev.LatencyMs < timing.Stale.Milliseconds() {
			t.Fatalf("bob half-open: %+v, want reason half_open, latency from his last heartbeat (after %v)", ev, bobLeft)
		}
		last := map[string]uint64{}
		for _, ev := range sink.all() {
			if ev.Version <= last[ev.User] {
				t.Fatalf("%s's version %d after %d: every change wants its own, growing", ev.User, ev.Version, last[ev.User])
			}
			last[ev.User] = ev.Version
		}
	})
}

// QueryAbove raises the view's version to the floor: its next change, in
// the same millisecond, is above it.
func TestQueryAboveRaisesTheVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &hookSink{}
		e := newEnvWith(t, Deps{Timing: config.Fast(), Changes: sink})
		d := e.openState("alice", "phone", messages.Platform_mobile, messages.Activity_active, "")
		was := sink.last(t).Version
		floor := was + 1000
		st, err := e.n.QueryAbove(context.Background(), "alice", floor)
		if err != nil || st.GetVersion() != floor {
			t.Fatalf("QueryAbove: %v, version %d, want %d", err, st.GetVersion(), floor)
		}
		d.conn.SetStatus(messages.Show_away, "", 0)
		if v := sink.last(t).Version; v <= floor {
			t.Fatalf("the next change's version %d, want above the floor %d", v, floor)
		}
	})
}
