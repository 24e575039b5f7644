package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
)

// dialState dials with the device's platform and activity, heartbeating
// until ctx ends, and never renewing its activity.
func (p *proc) dialState(ctx context.Context, user, device string, pl messages.Platform, a messages.Activity) *client.Conn {
	p.t.Helper()
	tok, _ := gateway.Tokens{Key: []byte("e2e")}.Mint(user, device, time.Hour)
	c, err := client.Dial(ctx, "ws://"+p.listen+"/ws", client.DialOptions{Token: tok, Attempt: 1, Platform: pl, Activity: a})
	if err != nil {
		p.t.Fatalf("dial %s/%s on %s: %v", user, device, p.name, err)
	}
	p.t.Cleanup(func() { _ = c.CloseNow() })
	keepAlive(ctx, c)
	return c
}

// watch subscribes c to target and passes on its snapshot's presence and
// every change, checking that versions only grow. Its reader and checker
// end before the test does (a cleanup stops and waits for them), so no
// check reports into a finished test.
func watch(ctx context.Context, t *testing.T, c *client.Conn, target string) <-chan *messages.Presence {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	snap := subscribe(ctx, t, c, target)
	out := make(chan *messages.Presence, 100)
	if ps := snap.GetPresences(); len(ps) == 1 {
		out <- ps[0]
	}
	events := make(chan *messages.Presence, 100)
	done := make(chan struct{})
	go readPresences(ctx, c, events)
	go func() {
		defer close(done)
		last := uint64(0)
		if len(snap.GetPresences()) == 1 {
			last = snap.GetPresences()[0].GetVersion()
		}
		for p := range events { // closed when the reader ends
			if p.GetVersion() <= last {
				t.Errorf("%s: version %d after %d: went back", target, p.GetVersion(), last)
			}
			last = p.GetVersion()
			select {
			case out <- p:
			case <-ctx.Done():
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return out
}

// until reads presences until one satisfies ok, and fails after within.
func until(t *testing.T, ps <-chan *messages.Presence, within time.Duration, what string, ok func(*messages.Presence) bool) *messages.Presence {
	t.Helper()
	deadline := time.After(within)
	var last *messages.Presence
	for {
		select {
		case p := <-ps:
			last = p
			if ok(p) {
				return p
			}
		case <-deadline:
			t.Fatalf("not within %v: %s (last seen %v)", within, what, last)
		}
	}
}

func platforms(p *messages.Presence) string {
	s := ""
	for _, d := range p.GetDevices() {
		s += fmt.Sprintf("%s:%s ", d.GetPlatform(), d.GetActivity())
	}
	return s
}

// Issue 24's test on three real nodes: the phone (mobile, background) on
// n2 and the laptop (desktop, active) on n3 of a user whose view and
// phone's lease live on n3; bob (exact) and carol (coarse) watch from n1.
// Bob sees her available on both platforms and carol online and nothing
// more; the route puts the laptop first; the laptop stops declaring and
// after idle-after bob sees away idle since the minute it was last active
// and the route has no attended device; n3 is killed with the laptop,
// which set the status text, and after the failover the phone's
// background and that text (the phone heard it from the view and tells it
// again) are still what bob sees, versions never going back.
func TestClusterDeviceState(t *testing.T) {
	const idleAfter = 2 * time.Second
	nodes, _ := startCluster(t, 3, "--idle-after", idleAfter.String())
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	user := ownedBy(t, n1, "n3")
	n1.put("/api/users/"+user+"/policy", `{"granularity":"exact","contacts":["bob","carol"],"coarse_for":["carol"]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	tok, _ := gateway.Tokens{Key: []byte("e2e")}.Mint(user, "phone", time.Hour)
	client.Start(ctx, client.Config{URLs: []string{"ws://" + n2.listen + "/ws", "ws://" + n1.listen + "/ws"}, Token: tok,
		Platform: messages.Platform_mobile, Activity: messages.Activity_background})
	lastActive := time.Now() // the laptop declares active at its handshake, and never again
	laptop := n3.dialState(ctx, user, "laptop", messages.Platform_desktop, messages.Activity_active)
	n1.waitOnline(user)
	waitFor(t, 10*time.Second, "both devices in the route", func() bool { return len(n1.routeState(user).Devices) == 2 })
	if err := laptop.SetStatusText(ctx, messages.Show_auto, "on the train", time.Time{}); err != nil {
		t.Fatal(err)
	}

	bob := watch(ctx, t, n1.dialAlive(ctx, "bob", "phone", 1), user)
	carol := watch(ctx, t, n1.dialAlive(ctx, "carol", "phone", 1), user)
	p := until(t, bob, 5*time.Second, "bob sees available on both platforms with the text", func(p *messages.Presence) bool {
		return p.GetShow() == messages.Show_available && platforms(p) == "mobile:background desktop:active " && p.GetStatusText() == "on the train"
	})
	c := until(t, carol, 5*time.Second, "carol sees online with the text", func(p *messages.Presence) bool {
		return p.GetStatus() == messages.Status_online && p.GetStatusText() == "on the train"
	})
	if len(c.GetDevices()) != 0 || c.GetIdleSinceMinute() != 0 || c.GetLastSeenMinute() != 0 {
		t.Fatalf("carol (coarse) sees %v: more than online", c)
	}
	if r := n1.routeState(user); r.Devices[0].Device != "laptop" || r.Devices[0].Platform != "desktop" || !r.Attended || !r.Foreground {
		t.Fatalf("route %+v, want the laptop first, attended", r)
	}

	p = until(t, bob, idleAfter+5*time.Second, "bob sees away with the idle minute", func(p *messages.Presence) bool {
		return p.GetShow() == messages.Show_away && p.GetIdleSinceMinute() != 0
	})
	if platforms(p) != "mobile:background desktop:idle " || p.GetStatus() != messages.Status_online {
		t.Fatalf("bob sees %v (%s)", p, platforms(p))
	}
	// Idle since the laptop was last active: its handshake, a few seconds
	// ago, so this minute or the one before.
	if m, want := int64(p.GetIdleSinceMinute()), lastActive.Unix()/60; m < want || m > time.Now().Unix()/60 {
		t.Fatalf("bob sees idle since minute %d, want %d (the laptop's handshake), within a minute", m, want)
	}
	if r := n1.routeState(user); r.Attended || !r.Foreground || r.Devices[0].Activity != "idle" {
		t.Fatalf("route %+v, want no attended device, the idle laptop first (it is in the foreground)", r)
	}
	until(t, carol, 5*time.Second, "carol sees away", func(p *messages.Presence) bool { return p.GetShow() == messages.Show_away })

	// The laptop's node dies with the laptop, which set the text, the
	// user's view and the phone's lease.
	n3.kill()
	until(t, bob, time.Duration(n1.bounds().OwnerCrashMs)*time.Millisecond+5*time.Second, "bob sees the phone alone, in the background, with the text", func(p *messages.Presence) bool {
		return p.GetStatus() == messages.Status_online && platforms(p) == "mobile:background " && p.GetStatusText() == "on the train" && p.GetShow() == messages.Show_away
	})
	waitFor(t, 5*time.Second, "the route has the phone alone", func() bool {
		r := n1.routeState(user)
		return len(r.Devices) == 1 && r.Devices[0].Device == "phone" && r.Devices[0].Activity == "background" && !r.Foreground
	})
}

// routeState is p's GET /api/route/{user} with its devices' state.
func (p *proc) routeState(user string) admin.Route {
	p.t.Helper()
	var r admin.Route
	if code := p.getJSON("/api/route/"+user, &r); code != 200 {
		p.t.Fatalf("%s /api/route/%s: %d", p.name, user, code)
	}
	return r
}
