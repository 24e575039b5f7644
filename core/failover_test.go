package core_test

import (
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// A holder re-registering (its view may have moved) is a renewal that
// announces the device again, so a re-created view learns of it.
func TestReRegisterAnnouncesAgain(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := &messages.Holder{Node: "g1", ConnId: "c1", Epoch: 3}
	var l core.Lease
	l.Acquire(h, true, now, time.Minute)
	res := l.Acquire(h, false, now.Add(time.Second), time.Minute)
	if res.Err != nil || !res.Up || res.Expiry == nil || l.RejectedStale != 0 {
		t.Fatalf("re-register: %+v", res)
	}
}

// A re-created view owes every re-attached sink one publish: online once a
// device re-registered, offline at Settle if none did; a sink that
// subscribed while it settled was told unknown and gets the state too.
func TestReattachedSinksGetTheSettledState(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := &core.Policy{Granularity: core.Exact, Contacts: map[string]bool{"bob": true, "carol": true}}

	gone := core.NewView("alice", 20*time.Second, pol, now.Add(-time.Hour))
	gone.Unsettled = true // as the actors make a view re-created after a change
	gone.Reattach("s-bob", "bob", nil, now)
	if p, _ := gone.Subscribe("s-carol", "carol", now); p.GetStatus() != messages.Status_unknown {
		t.Fatalf("new subscriber while settling: %v, want unknown", p)
	}
	res := gone.Settle(now.Add(70 * time.Second))
	if len(res.Deliveries) != 2 || res.Deliveries[0].Presence.GetStatus() != messages.Status_offline || res.Deliveries[1].Presence.GetStatus() != messages.Status_offline {
		t.Fatalf("settle with no device: %+v, want offline to both (the re-attached sink, and the new one told unknown)", res.Deliveries)
	}
	// Settled, a new subscriber is told the state and sent nothing more.
	if p, _ := gone.Subscribe("s-dan", "carol", now); p.GetStatus() != messages.Status_offline {
		t.Fatalf("after settle: %v", p)
	}

	back := core.NewView("alice", 20*time.Second, pol, time.Time{})
	back.Unsettled = true
	back.Reattach("s-bob", "bob", nil, now)
	res = back.DeviceUp("phone", &messages.Holder{Node: "g1", ConnId: "c1", Epoch: 3}, now)
	if len(res.Deliveries) != 1 || res.Deliveries[0].Presence.GetStatus() != messages.Status_online {
		t.Fatalf("re-registered device: %+v", res.Deliveries)
	}
	if res = back.Settle(now.Add(70 * time.Second)); len(res.Deliveries) != 0 {
		t.Fatalf("settle after the device came back sent %+v", res.Deliveries)
	}
}

// A sink re-attached with what it last passed on is sent only a change: a
// failover in which the user stayed online is invisible to it, one in which
// the user went offline is not.
func TestReattachWithLastSendsOnlyChanges(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := &core.Policy{Granularity: core.Exact, Contacts: map[string]bool{"bob": true}}
	was := &messages.Presence{User: "alice", Status: messages.Status_online, Show: messages.Show_available, Version: 7,
		Devices: []*messages.DevicePresence{{Platform: messages.Platform_other, Activity: messages.Activity_active}}}

	stayed := core.NewView("alice", 20*time.Second, pol, time.Time{})
	stayed.Unsettled = true
	stayed.Reattach("s-bob", "bob", was, now)
	up := stayed.DeviceUp("phone", &messages.Holder{Node: "g1", ConnId: "c1", Epoch: 3}, now)
	if settle := stayed.Settle(now.Add(time.Second)); len(up.Deliveries)+len(settle.Deliveries) != 0 {
		t.Fatalf("user stayed online: sent %+v then %+v, want nothing", up.Deliveries, settle.Deliveries)
	}

	left := core.NewView("alice", 20*time.Second, pol, time.Time{})
	left.Unsettled = true
	left.Reattach("s-bob", "bob", was, now)
	res := left.Settle(now.Add(time.Second))
	if len(res.Deliveries) != 1 || res.Deliveries[0].Presence.GetStatus() != messages.Status_offline || res.Deliveries[0].Presence.GetVersion() <= was.GetVersion() {
		t.Fatalf("no device re-registered: %+v, want one newer offline", res.Deliveries)
	}
}

// An unsettled view (it may replace one lost with a member) takes the
// lease's device-down for a device it never saw as a departure, but lets
// Settle publish the offline: another device of the user may still be on
// its way to re-register. A settled view ignores such a down.
func TestUnsettledViewTakesUnknownDown(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v, res := unsettledDown(now)
	if res.Stale || res.Debounce == nil {
		t.Fatalf("unknown down on an unsettled view: %+v", res)
	}
	if res := v.DebounceFired(res.Debounce.Gen, res.Debounce.At); len(res.Deliveries) != 0 {
		t.Fatalf("unsettled view published at the debounce: %+v", res.Deliveries)
	}
	res = v.Settle(now.Add(time.Minute))
	if len(res.Deliveries) != 1 || res.Deliveries[0].Presence.GetStatus() != messages.Status_offline {
		t.Fatalf("at settle: %+v", res.Deliveries)
	}
	settled := core.NewView("alice", 20*time.Second, v.Policy, time.Time{})
	if res := settled.DeviceDown("phone", 3, now, now); !res.Stale {
		t.Fatalf("settled view took an unknown down: %+v", res)
	}
}

// A view whose devices' node died drops them (their leases may be gone too)
// and publishes the offline after the debounce; devices elsewhere stay.
func TestViewGatewayDown(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := &core.Policy{Granularity: core.Exact, Contacts: map[string]bool{"bob": true}}
	v := core.NewView("alice", 20*time.Second, pol, time.Time{})
	v.Subscribe("s-bob", "bob", now)
	v.DeviceUp("phone", &messages.Holder{Node: "n2", ConnId: "c1", Epoch: 1}, now)
	v.DeviceUp("laptop", &messages.Holder{Node: "n3", ConnId: "c2", Epoch: 1}, now)
	if res := v.GatewayDown("n2", time.Time{}, now); res.Debounce != nil || v.Devices.Len() != 1 {
		t.Fatalf("n2 down with the laptop on n3: %+v, devices %v", res, v.Devices)
	}
	res := v.GatewayDown("n3", time.Time{}, now.Add(time.Second))
	if res.Debounce == nil {
		t.Fatalf("last device's node down: %+v", res)
	}
	res = v.DebounceFired(res.Debounce.Gen, res.Debounce.At)
	if len(res.Deliveries) != 1 || res.Deliveries[0].Presence.GetStatus() != messages.Status_offline {
		t.Fatalf("deliveries %+v", res.Deliveries)
	}
}

// An unsettled view's pending offline is cancelled by a device that
// re-registers before Settle: no offline, no flap.
func TestUnsettledViewNoFlap(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v, res := unsettledDown(now)
	v.DebounceFired(res.Debounce.Gen, res.Debounce.At)
	up := v.DeviceUp("laptop", &messages.Holder{Node: "g2", ConnId: "c9", Epoch: 1}, now.Add(25*time.Second))
	settle := v.Settle(now.Add(40 * time.Second))
	if len(up.Deliveries) != 1 || up.Deliveries[0].Presence.GetStatus() != messages.Status_online || len(settle.Deliveries) != 0 {
		t.Fatalf("up %+v, settle %+v: want one online and nothing more", up.Deliveries, settle.Deliveries)
	}
}

// A lease re-created empty (its member died) still takes the release of the
// device's newest connection, so the view does not keep the device online;
// an older connection's release is still refused.
func TestReCreatedLeaseTakesNewestRelease(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := core.Lease{Floor: 7} // reloaded from the store
	if res := l.Release("c-old", 6, messages.EndReason_close, now); res.Err == nil {
		t.Fatalf("older connection's release accepted: %+v", res)
	}
	res := l.Release("c7", 7, messages.EndReason_close, now)
	if !res.Down || l.EndedEpoch != 7 {
		t.Fatalf("newest release on a re-created lease: %+v", res)
	}
	if r := l.Renew(&messages.Holder{Node: "g1", ConnId: "c7", Epoch: 7}, now, time.Minute); r.Err == nil {
		t.Fatalf("renew after the release revived it: %+v", r)
	}
	if r := l.Release("c7", 7, messages.EndReason_close, now); r.Err == nil {
		t.Fatalf("a second release was accepted: %+v", r)
	}
}

// A subscriber of an unsettled view that knows no device yet gets unknown,
// never offline (a device may still be re-registering), then the state;
// a non-contact still gets nothing, and a settled view answers offline.
func TestUncertainViewSnapshotIsUnknown(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := &core.Policy{Granularity: core.Exact, Contacts: map[string]bool{"bob": true}}
	v := core.NewView("alice", 20*time.Second, pol, now.Add(-time.Hour))
	v.Unsettled = true
	p, _ := v.Subscribe("s-bob", "bob", now)
	if p.GetStatus() != messages.Status_unknown || p.GetLastSeenMinute() != 0 {
		t.Fatalf("snapshot while settling: %v, want unknown", p)
	}
	if p, _ := v.Subscribe("s-eve", "eve", now); p != nil {
		t.Fatalf("non-contact while settling: %v, want nothing", p)
	}
	res := v.DeviceUp("phone", &messages.Holder{Node: "g1", ConnId: "c1", Epoch: 1}, now.Add(time.Second))
	if len(res.Deliveries) != 1 || res.Deliveries[0].Presence.GetStatus() != messages.Status_online || res.Deliveries[0].Presence.GetVersion() <= p.GetVersion() {
		t.Fatalf("device re-registered: %+v, want online after the unknown", res.Deliveries)
	}
	settled := core.NewView("alice", 20*time.Second, pol, now.Add(-time.Hour))
	if p, _ := settled.Subscribe("s-bob", "bob", now); p.GetStatus() != messages.Status_offline {
		t.Fatalf("settled view, no device: %v, want offline", p)
	}
}

// A re-attach that reaches a view after it settled gets what differs at
// once (else the sink would keep "online" for a user gone meanwhile), and
// versions go on from the sink's even if this node's clock is behind.
func TestLateReattachGetsTheDifference(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := &core.Policy{Granularity: core.Exact, Contacts: map[string]bool{"bob": true}}
	v := core.NewView("alice", 20*time.Second, pol, now.Add(-time.Hour))
	ahead := uint64(now.Add(time.Hour).UnixMilli()) // the old node's clock was an hour ahead
	was := &messages.Presence{User: "alice", Status: messages.Status_online, Version: ahead}
	res := v.Reattach("s-bob", "bob", was, now)
	if len(res.Deliveries) != 1 || res.Deliveries[0].Presence.GetStatus() != messages.Status_offline || res.Deliveries[0].Presence.GetVersion() <= ahead {
		t.Fatalf("late re-attach of a sink that saw online: %+v, want offline newer than %d", res.Deliveries, ahead)
	}
	same := &messages.Presence{User: "alice", Status: messages.Status_offline, LastSeenMinute: res.Deliveries[0].Presence.GetLastSeenMinute(), Version: ahead + 1}
	if res := v.Reattach("s-bob2", "bob", same, now); len(res.Deliveries) != 0 {
		t.Fatalf("late re-attach of a sink that is up to date: %+v, want nothing", res.Deliveries)
	}
}

// A device re-registering with a re-created view keeps the time its
// connection opened, not the time of the re-register.
func TestReRegisterKeepsSince(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	opened := now.Add(-time.Hour)
	v := core.NewView("alice", 20*time.Second, nil, time.Time{})
	v.DeviceUp("phone", &messages.Holder{Node: "g1", ConnId: "c1", Epoch: 3, SinceMs: opened.UnixMilli()}, now)
	v.DeviceUp("laptop", &messages.Holder{Node: "g1", ConnId: "c2", Epoch: 1}, now)
	if !dev(&v.Devices, "phone").Since.Equal(opened) || !dev(&v.Devices, "laptop").Since.Equal(now) {
		t.Fatalf("since %v, want the phone's opening and the laptop's first up", v.Devices)
	}
}

// unsettledDown is an unsettled view of alice, bob re-attached to it, that
// gets a down for a phone it never saw.
func unsettledDown(now time.Time) (*core.View, core.ViewResult) {
	pol := &core.Policy{Granularity: core.Exact, Contacts: map[string]bool{"bob": true}}
	v := core.NewView("alice", 20*time.Second, pol, time.Time{})
	v.Unsettled = true
	v.Reattach("s-bob", "bob", nil, now)
	return v, v.DeviceDown("phone", 3, now, now)
}

// A gateway crash's offline is measured from the devices' last sign of life
// the view knows of (when its member last heard from the dead node, or the
// device's coming up if later), not from the moment the failure detector
// reported it: the latency covers the detection and the debounce, as the
// chaos harness measures it from the kill.
func TestGatewayCrashDepartsAtLastHeard(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	crash := t0.Add(10 * time.Second)
	detected := crash.Add(1200 * time.Millisecond) // failure detection
	const debounce = 200 * time.Millisecond
	publishAfter := debounce - core.DeliveryBudget(debounce)
	for _, tc := range []struct {
		name      string
		up        time.Time // the device came up
		lastHeard time.Time
		want      time.Time // the departure: the published last seen
	}{
		{"last heard before the crash", t0, crash.Add(-50 * time.Millisecond), crash.Add(-50 * time.Millisecond)},
		{"device up after the last probe", crash.Add(-10 * time.Millisecond), crash.Add(-300 * time.Millisecond), crash.Add(-10 * time.Millisecond)},
		{"never heard: the detection", t0, time.Time{}, detected},
		{"another member's clock ahead: at most now", t0, detected.Add(time.Second), detected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := core.NewView("alice", debounce, nil, time.Time{})
			v.DeviceUp("phone", &messages.Holder{Node: "n2", ConnId: "c1", Epoch: 1}, tc.up)
			res := v.GatewayDown("n2", tc.lastHeard, detected)
			if res.Debounce == nil || !res.Debounce.At.Equal(detected.Add(publishAfter)) {
				t.Fatalf("debounce %+v, want at detection + %v", res.Debounce, publishAfter)
			}
			if res = v.DebounceFired(res.Debounce.Gen, res.Debounce.At); !res.Published || v.Online {
				t.Fatalf("not published offline: %+v", res)
			}
			if !v.LastSeen.Equal(tc.want) {
				t.Fatalf("departure %v after the crash, want %v", v.LastSeen.Sub(crash), tc.want.Sub(crash))
			}
			t.Logf("latency %v (detection %v + debounce %v after the crash)", detected.Add(publishAfter).Sub(v.LastSeen), detected.Sub(crash), publishAfter)
		})
	}
}

// A lease reclaimed for a dead node ends at the later of its last renewal
// and the moment its member last heard from that node.
func TestLeaseGatewayDownLastAlive(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := &messages.Holder{Node: "n2", ConnId: "c1", Epoch: 1}
	for _, tc := range []struct {
		name      string
		lastHeard time.Time
		want      time.Time
	}{
		{"heard after the renewal", t0.Add(400 * time.Millisecond), t0.Add(400 * time.Millisecond)},
		{"heard before the renewal", t0.Add(-time.Second), t0},
		{"never heard", time.Time{}, t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l core.Lease
			if res := l.Acquire(h, true, t0, 1500*time.Millisecond); res.Err != nil {
				t.Fatal(res.Err)
			}
			res := l.GatewayDown("n2", tc.lastHeard)
			if !res.Down || !res.LastAlive.Equal(tc.want) {
				t.Fatalf("down %v last alive %v, want %v", res.Down, res.LastAlive, tc.want)
			}
		})
	}
}

// A view re-created after its node died with the device's gateway and
// lease learns nothing of the device: the offline it publishes at Settle to
// sinks that saw the user online has no departure to measure from, and is
// reported Unmeasured, once per offline; an offline with a departure, or one
// nobody saw the user online before, is not.
func TestSettledOfflineWithoutDepartureIsUnmeasured(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	settle := now.Add(2 * time.Second)
	pol := &core.Policy{Granularity: core.Exact, Contacts: map[string]bool{"bob": true, "carol": true}}
	online := &messages.Presence{User: "alice", Status: messages.Status_online, Show: messages.Show_available, Version: 7}
	offline := &messages.Presence{User: "alice", Status: messages.Status_offline, Version: 7}
	phone := &messages.Holder{Node: "g1", ConnId: "c1", Epoch: 3}
	cases := []struct {
		name string
		last *messages.Presence // what the re-attached sink last passed on
		run  func(v *core.View) core.ViewResult
		want bool
	}{
		{"no device re-registered", online, func(v *core.View) core.ViewResult { return v.Settle(settle) }, true},
		{"the device re-registered", online, func(v *core.View) core.ViewResult {
			v.DeviceUp("phone", phone, now)
			return v.Settle(settle)
		}, false},
		{"the sink saw the user offline", offline, func(v *core.View) core.ViewResult { return v.Settle(settle) }, false},
		{"the sink saw nothing", nil, func(v *core.View) core.ViewResult { return v.Settle(settle) }, false},
		{"a down with its departure", online, func(v *core.View) core.ViewResult {
			v.DeviceDown("phone", 3, now, now)
			return v.Settle(now.Add(time.Minute)) // the debounce ran out: measured
		}, false},
		{"a second sink re-attaching late", online, func(v *core.View) core.ViewResult {
			v.Settle(settle)
			return v.Reattach("s-carol", "carol", online, settle.Add(time.Second))
		}, false},
	}
	for _, c := range cases {
		v := core.NewView("alice", 20*time.Second, pol, now.Add(-time.Hour))
		v.Unsettled = true
		v.Reattach("s-bob", "bob", c.last, now)
		if res := c.run(v); res.Unmeasured != c.want {
			t.Errorf("%s: Unmeasured %v, want %v (%+v)", c.name, res.Unmeasured, c.want, res.Deliveries)
		}
	}
	// A view that never knew it moved (no membership change heard in time)
	// tells a late re-attached sink the same.
	v := core.NewView("alice", 20*time.Second, pol, now.Add(-time.Hour))
	if res := v.Reattach("s-bob", "bob", online, now); !res.Unmeasured || len(res.Deliveries) != 1 {
		t.Errorf("settled view, sink saw online: %+v, want one offline, Unmeasured", res)
	}
	if res := v.Reattach("s-carol", "carol", online, now); res.Unmeasured {
		t.Errorf("the same offline reported twice: %+v", res)
	}
}
