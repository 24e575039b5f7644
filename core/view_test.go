package core_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/proto"
)

// newView is alice's view with the seed debounce and policy(g), never seen
// leaving before.
func newView(g core.Granularity) *core.View {
	return core.NewView("alice", seedDebounce, policy(g), time.Time{})
}

// got maps each delivered sink to its presence, failing on a sink delivered
// twice in one result.
func got(t *testing.T, res core.ViewResult) map[string]*messages.Presence {
	t.Helper()
	m := map[string]*messages.Presence{}
	for _, d := range res.Deliveries {
		if _, dup := m[d.Sink]; dup {
			t.Fatalf("sink %s delivered twice in one result", d.Sink)
		}
		if d.Presence == nil {
			t.Fatalf("sink %s delivered a nil presence", d.Sink)
		}
		m[d.Sink] = d.Presence
	}
	return m
}

func sinks(m map[string]*messages.Presence) []string {
	return slices.Sorted(maps.Keys(m))
}

func mustSubscribe(t *testing.T, v *core.View, sink, viewer string, now time.Time) *messages.Presence {
	t.Helper()
	p, _ := v.Subscribe(sink, viewer, now)
	return p
}

// E01 6.1 "主动关闭（300 秒） | 320 秒发布离线，恰好等于去抖": a graceful
// close publishes offline at exactly the debounce (20 s in the seed preset).
func TestViewGracefulCloseOfflineAtDebounce(t *testing.T) {
	v := newView(core.Exact)
	if p := mustSubscribe(t, v, "s-bob", "bob", t0); p.GetStatus() != messages.Status_offline || p.GetLastSeenMinute() != 0 {
		t.Fatalf("initial view %v, want offline never seen", p)
	}
	res := v.DeviceUp("phone", hold("g1", "c1", 1), t0)
	if d := got(t, res); !res.Published || d["s-bob"].GetStatus() != messages.Status_online || res.Debounce != nil {
		t.Fatalf("device up: %+v, want online published to s-bob", res)
	}

	closed := at(300 * time.Second)
	res = v.DeviceDown("phone", 1, closed, closed)
	if res.Published || len(res.Deliveries) != 0 || res.Stale {
		t.Fatalf("device down published at once: %+v", res)
	}
	// The debounce keeps core.DeliveryBudget for the event's way to the
	// subscriber, so that it arrives within the debounce.
	if want := seedDebounce - core.DeliveryBudget(seedDebounce); res.Debounce == nil || res.Debounce.At.Sub(closed) != want {
		t.Fatalf("debounce timer %+v, want exactly %v after the close", res.Debounce, want)
	}
	if !v.Online || v.Idle() {
		t.Fatalf("during the debounce: online %v idle %v, want still online, not idle", v.Online, v.Idle())
	}
	res = v.DebounceFired(res.Debounce.Gen, res.Debounce.At)
	d := got(t, res)
	if !res.Published || sinks(d)[0] != "s-bob" || len(d) != 1 {
		t.Fatalf("debounce fired: %+v, want offline published to s-bob", res)
	}
	if p := d["s-bob"]; p.GetStatus() != messages.Status_offline || p.GetLastSeenMinute() != uint32(closed.Unix()/60) {
		t.Fatalf("offline %v, want last seen minute %d", p, closed.Unix()/60)
	}
	if v.Online || !v.LastSeen.Equal(closed) || v.PublishedFlips != 2 || v.DeviceFlips != 2 {
		t.Fatalf("after: online %v last seen %v flips %d/%d", v.Online, v.LastSeen, v.PublishedFlips, v.DeviceFlips)
	}
}

// The debounce timer fires into nothing unless its generation is the
// pending one.
func TestViewDebounceFiredIgnored(t *testing.T) {
	h1, h2 := hold("g1", "c1", 1), hold("g1", "c2", 2)
	tests := []struct {
		name string
		// run brings the view to the state under test and returns the gen
		// that fires.
		run func(v *core.View) uint64
	}{
		{"never pending", func(v *core.View) uint64 { return v.Gen }},
		{"online, no departure", func(v *core.View) uint64 {
			v.DeviceUp("phone", h1, t0)
			return v.Gen
		}},
		{"stale generation", func(v *core.View) uint64 {
			v.DeviceUp("phone", h1, t0)
			tm := v.DeviceDown("phone", 1, at(time.Second), at(time.Second)).Debounce
			return tm.Gen - 1
		}},
		{"future generation", func(v *core.View) uint64 {
			v.DeviceUp("phone", h1, t0)
			tm := v.DeviceDown("phone", 1, at(time.Second), at(time.Second)).Debounce
			return tm.Gen + 1
		}},
		{"device came back", func(v *core.View) uint64 {
			v.DeviceUp("phone", h1, t0)
			tm := v.DeviceDown("phone", 1, at(time.Second), at(time.Second)).Debounce
			v.DeviceUp("phone", h2, at(5*time.Second))
			return tm.Gen
		}},
		{"another device came", func(v *core.View) uint64 {
			v.DeviceUp("phone", h1, t0)
			tm := v.DeviceDown("phone", 1, at(time.Second), at(time.Second)).Debounce
			v.DeviceUp("laptop", h1, at(5*time.Second))
			return tm.Gen
		}},
		{"already fired", func(v *core.View) uint64 {
			v.DeviceUp("phone", h1, t0)
			tm := v.DeviceDown("phone", 1, at(time.Second), at(time.Second)).Debounce
			v.DebounceFired(tm.Gen, tm.At)
			return tm.Gen
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newView(core.Exact)
			mustSubscribe(t, v, "s-bob", "bob", t0)
			gen := tc.run(v)
			online, version, flips := v.Online, v.Version, v.PublishedFlips
			res := v.DebounceFired(gen, at(time.Hour))
			if res.Published || len(res.Deliveries) != 0 || res.Debounce != nil {
				t.Fatalf("fired: %+v, want nothing", res)
			}
			if v.Online != online || v.Version != version || v.PublishedFlips != flips {
				t.Fatalf("state changed: online %v->%v version %d->%d flips %d->%d", online, v.Online, version, v.Version, flips, v.PublishedFlips)
			}
		})
	}
}

// E01 6.1 "两台设备先后离开 | 只在最后一台离开 20 秒后发布离线": two devices,
// offline only debounce after the LAST leaves.
func TestViewTwoDevicesOfflineAfterLastLeaves(t *testing.T) {
	v := newView(core.Exact)
	mustSubscribe(t, v, "s-bob", "bob", t0)
	if res := v.DeviceUp("phone", hold("g1", "p1", 1), t0); !res.Published {
		t.Fatalf("first device: %+v, want published", res)
	}
	if res := v.DeviceUp("laptop", hold("g2", "l1", 1), t0); res.Published || len(res.Deliveries) != 0 {
		t.Fatalf("second device: %+v, want nothing (already online)", res)
	}
	res := v.DeviceDown("phone", 1, at(100*time.Second), at(100*time.Second))
	if res.Debounce != nil || res.Published || len(res.Deliveries) != 0 || res.Stale {
		t.Fatalf("first leaves: %+v, want nothing (laptop still online)", res)
	}
	left := at(200 * time.Second)
	res = v.DeviceDown("laptop", 1, left, left)
	if want := left.Add(seedDebounce - core.DeliveryBudget(seedDebounce)); res.Debounce == nil || !res.Debounce.At.Equal(want) {
		t.Fatalf("last leaves: %+v, want a debounce at %v", res, want)
	}
	res = v.DebounceFired(res.Debounce.Gen, res.Debounce.At)
	if p := got(t, res)["s-bob"]; !res.Published || p.GetStatus() != messages.Status_offline || p.GetLastSeenMinute() != uint32(left.Unix()/60) {
		t.Fatalf("offline %v, want the last device's departure minute", p)
	}
	if v.DeviceFlips != 4 || v.PublishedFlips != 2 {
		t.Fatalf("flips device %d published %d, want 4 and 2", v.DeviceFlips, v.PublishedFlips)
	}
}

// E01 6.1 "关闭后 10 秒内重连 | 订阅者没有看到任何变化": reconnecting within
// the debounce publishes nothing; the pending timer fires into nothing.
func TestViewReconnectWithinDebouncePublishesNothing(t *testing.T) {
	for _, after := range []time.Duration{0, time.Second, 10 * time.Second, seedDebounce - time.Nanosecond} {
		t.Run(after.String(), func(t *testing.T) {
			v := newView(core.Exact)
			mustSubscribe(t, v, "s-bob", "bob", t0)
			v.DeviceUp("phone", hold("g1", "c1", 1), t0)
			closed := at(100 * time.Second)
			tm := v.DeviceDown("phone", 1, closed, closed).Debounce
			res := v.DeviceUp("phone", hold("g1", "c2", 2), closed.Add(after))
			if res.Published || len(res.Deliveries) != 0 || res.Stale {
				t.Fatalf("reconnect: %+v, want nothing", res)
			}
			if res := v.DebounceFired(tm.Gen, tm.At); res.Published || len(res.Deliveries) != 0 {
				t.Fatalf("old debounce: %+v, want nothing", res)
			}
			if !v.Online || v.PublishedFlips != 1 || !v.LastSeen.IsZero() {
				t.Fatalf("online %v flips %d last seen %v, want one online and no departure", v.Online, v.PublishedFlips, v.LastSeen)
			}
		})
	}
}

// E01 6.4: a lease flapping (TTL shorter than the renewal) within the
// debounce flips the device but publishes nothing; with no debounce every
// flap is published.
func TestViewDebounceHidesFlaps(t *testing.T) {
	for _, tc := range []struct {
		debounce      time.Duration
		wantPublished uint64
	}{{seedDebounce, 1}, {0, 1 + 2*16}} {
		t.Run(tc.debounce.String(), func(t *testing.T) {
			v := core.NewView("alice", tc.debounce, policy(core.Exact), time.Time{})
			h := hold("g1", "c1", 1)
			v.DeviceUp("phone", h, t0)
			for i := range 16 {
				down := at(time.Duration(i+1) * time.Minute)
				res := v.DeviceDown("phone", 1, down, down)
				up := down.Add(time.Second) // the renewal revives the lease
				if res.Debounce == nil {
					t.Fatalf("no timer armed for the offline")
				}
				if res.Debounce.At.Before(up) { // it fires first
					v.DebounceFired(res.Debounce.Gen, res.Debounce.At)
				}
				v.DeviceUp("phone", h, up)
				v.DebounceFired(res.Debounce.Gen, res.Debounce.At) // stale if it fired or the device came back
			}
			if v.DeviceFlips != 1+2*16 || v.PublishedFlips != tc.wantPublished {
				t.Fatalf("flips device %d published %d, want %d and %d", v.DeviceFlips, v.PublishedFlips, 1+2*16, tc.wantPublished)
			}
		})
	}
}

// Debounce 0 arms the offline's timer due at once (the actor fires it
// through its verdict gate, actors/stall.go), and publishes it when fired.
func TestViewZeroDebounce(t *testing.T) {
	v := core.NewView("alice", 0, policy(core.Exact), time.Time{})
	mustSubscribe(t, v, "s-bob", "bob", t0)
	v.DeviceUp("phone", hold("g1", "c1", 1), t0)
	down := at(time.Minute)
	res := v.DeviceDown("phone", 1, down, down)
	if res.Debounce == nil || !res.Debounce.At.Equal(down) || res.Published || !v.Online {
		t.Fatalf("down: %+v, want a timer due at once and nothing published yet", res)
	}
	res = v.DebounceFired(res.Debounce.Gen, down)
	if !res.Published || got(t, res)["s-bob"].GetStatus() != messages.Status_offline {
		t.Fatalf("fired: %+v, want the offline published", res)
	}
	if v.Online || v.Idle() {
		t.Fatalf("online %v idle %v, want offline and not idle (one subscriber)", v.Online, v.Idle())
	}
}

// downAndFire is DeviceDown and, when its timer is due by now (debounce
// 0), the timer firing.
func downAndFire(v *core.View, device string, epoch uint64, last, now time.Time) core.ViewResult {
	res := v.DeviceDown(device, epoch, last, now)
	if res.Debounce != nil && !res.Debounce.At.After(now) {
		return v.DebounceFired(res.Debounce.Gen, now)
	}
	return res
}

// The version strictly increases across publishes and is >= now in unix ms,
// even when the clock repeats or goes back.
func TestViewVersion(t *testing.T) {
	v := newView(core.Exact)
	mustSubscribe(t, v, "s-bob", "bob", t0)
	h := hold("g1", "c1", 1)
	steps := []struct {
		name string
		now  time.Time
		op   func(v *core.View, now time.Time) core.ViewResult
	}{
		{"device up", t0, func(v *core.View, now time.Time) core.ViewResult { return v.DeviceUp("phone", h, now) }},
		{"show away, same instant", t0, func(v *core.View, now time.Time) core.ViewResult { return v.SetShow(messages.Show_away, now) }},
		{"show dnd, same ms", t0.Add(time.Microsecond), func(v *core.View, now time.Time) core.ViewResult {
			return v.SetShow(messages.Show_dnd, now)
		}},
		{"show available, clock 1 h back", t0.Add(-time.Hour), func(v *core.View, now time.Time) core.ViewResult {
			return v.SetShow(messages.Show_available, now)
		}},
		{"age, nothing to deliver", at(time.Minute), func(v *core.View, now time.Time) core.ViewResult { return v.Age(now) }},
		{"policy, later", at(time.Hour), func(v *core.View, now time.Time) core.ViewResult { return v.SetPolicy(policy(core.Coarse), now) }},
		{"device down at once (debounce 0)", at(2 * time.Hour), func(v *core.View, now time.Time) core.ViewResult {
			v.Debounce = 0
			return downAndFire(v, "phone", 1, now, now)
		}},
	}
	prev := v.Version
	for _, s := range steps {
		res := s.op(v, s.now)
		if v.Version <= prev {
			t.Fatalf("%s: version %d after %d, want strictly greater", s.name, v.Version, prev)
		}
		if v.Version < uint64(s.now.UnixMilli()) {
			t.Fatalf("%s: version %d < now %d ms", s.name, v.Version, s.now.UnixMilli())
		}
		for _, d := range res.Deliveries {
			if d.Presence.GetVersion() != v.Version {
				t.Fatalf("%s: delivery version %d, want %d", s.name, d.Presence.GetVersion(), v.Version)
			}
		}
		prev = v.Version
	}
	// A subscriber joining now sees the current version.
	if p := mustSubscribe(t, v, "s-carol", "carol", at(3*time.Hour)); p.GetVersion() != v.Version {
		t.Fatalf("subscribe version %d, want %d", p.GetVersion(), v.Version)
	}
}

// Subscribers get a delivery only when their trimmed view changed.
func TestViewDeliversOnlyChanges(t *testing.T) {
	v := newView(core.Exact)
	// bob: exact contact; dave: hidden_from (unknown); mallory: not a
	// contact (nothing); alice: herself.
	initial := map[string]*want{
		"s-bob":     {status: messages.Status_offline},
		"s-dave":    {status: messages.Status_unknown},
		"s-mallory": nil,
		"s-alice":   {status: messages.Status_offline},
	}
	for sink, w := range initial {
		p := mustSubscribe(t, v, sink, sink[2:], t0)
		if (p == nil) != (w == nil) || p != nil && p.GetStatus() != w.status {
			t.Fatalf("subscribe %s = %v, want %+v", sink, p, w)
		}
	}
	h := hold("g1", "c1", 1)
	steps := []struct {
		name      string
		op        func(now time.Time) core.ViewResult
		want      map[string]want
		noPublish bool // the view is not even re-published (version kept)
	}{
		{"device up", func(now time.Time) core.ViewResult { return v.DeviceUp("phone", h, now) }, map[string]want{
			"s-bob": {status: messages.Status_online, show: messages.Show_available}, "s-alice": {status: messages.Status_online, show: messages.Show_available},
		}, false},
		{"same device up again", func(now time.Time) core.ViewResult { return v.DeviceUp("phone", h, now) }, nil, true},
		{"show away", func(now time.Time) core.ViewResult { return v.SetShow(messages.Show_away, now) }, map[string]want{
			"s-bob": {status: messages.Status_online, show: messages.Show_away}, "s-alice": {status: messages.Status_online, show: messages.Show_away},
		}, false},
		{"show away again", func(now time.Time) core.ViewResult { return v.SetShow(messages.Show_away, now) }, nil, true},
		{"show unspecified", func(now time.Time) core.ViewResult { return v.SetShow(messages.Show_show_unspecified, now) }, nil, true},
		// Going invisible looks to others like leaving now: last seen is
		// this minute (step 6), not an older departure that would give it away.
		{"show invisible", func(now time.Time) core.ViewResult { return v.SetShow(messages.Show_invisible, now) }, map[string]want{
			"s-bob": {status: messages.Status_offline, minute: uint32(at(6*time.Minute).Unix() / 60)}, "s-alice": {status: messages.Status_online, show: messages.Show_invisible},
		}, false},
		{"age", func(now time.Time) core.ViewResult { return v.Age(now) }, nil, false},
		{"same policy again", func(now time.Time) core.ViewResult { return v.SetPolicy(policy(core.Exact), now) }, nil, false},
		{"show available", func(now time.Time) core.ViewResult { return v.SetShow(messages.Show_available, now) }, map[string]want{
			"s-bob": {status: messages.Status_online, show: messages.Show_available}, "s-alice": {status: messages.Status_online, show: messages.Show_available},
		}, false},
	}
	for i, s := range steps {
		now := at(time.Duration(i+1) * time.Minute)
		version := v.Version
		d := got(t, s.op(now))
		if s.noPublish != (v.Version == version) {
			t.Errorf("%s: version %d -> %d, want re-published %v", s.name, version, v.Version, !s.noPublish)
		}
		if !slices.Equal(sinks(d), slices.Sorted(maps.Keys(s.want))) {
			t.Fatalf("%s: delivered to %v, want %v", s.name, sinks(d), slices.Sorted(maps.Keys(s.want)))
		}
		for sink, w := range s.want {
			p := d[sink]
			if p.GetStatus() != w.status || p.GetShow() != w.show || p.GetLastSeenMinute() != w.minute {
				t.Errorf("%s: %s got %v, want %+v", s.name, sink, p, w)
			}
			if v.Subs[sink].Last != p {
				t.Errorf("%s: %s last sent not recorded", s.name, sink)
			}
		}
	}
}

// Unsubscribe is idempotent and stops deliveries.
func TestViewUnsubscribe(t *testing.T) {
	v := newView(core.Exact)
	mustSubscribe(t, v, "s-bob", "bob", t0)
	mustSubscribe(t, v, "s-carol", "carol", t0)
	v.Unsubscribe("s-bob")
	v.Unsubscribe("s-bob")
	v.Unsubscribe("never-subscribed")
	if _, ok := v.Subs["s-bob"]; ok || len(v.Subs) != 1 {
		t.Fatalf("subs %v, want only s-carol", slices.Sorted(maps.Keys(v.Subs)))
	}
	res := v.DeviceUp("phone", hold("g1", "c1", 1), t0)
	if d := got(t, res); !slices.Equal(sinks(d), []string{"s-carol"}) {
		t.Fatalf("delivered to %v, want [s-carol]", sinks(d))
	}
	v.Unsubscribe("s-carol")
	if res := v.SetShow(messages.Show_away, at(time.Second)); len(res.Deliveries) != 0 {
		t.Fatalf("delivered %v to no subscriber", sinks(got(t, res)))
	}
}

// Subscribing again with the same sink replaces the registration.
func TestViewResubscribeReplaces(t *testing.T) {
	v := newView(core.Exact)
	v.DeviceUp("phone", hold("g1", "c1", 1), t0)
	if p := mustSubscribe(t, v, "s1", "bob", t0); p.GetStatus() != messages.Status_online {
		t.Fatalf("bob sees %v", p)
	}
	if p := mustSubscribe(t, v, "s1", "mallory", t0); p != nil {
		t.Fatalf("mallory sees %v, want nil", p)
	}
	if len(v.Subs) != 1 || v.Subs["s1"].Viewer != "mallory" || v.Subs["s1"].Last != nil {
		t.Fatalf("subs %+v, want s1 as mallory with nothing sent", v.Subs["s1"])
	}
	if res := v.SetShow(messages.Show_away, at(time.Second)); len(res.Deliveries) != 0 {
		t.Fatalf("non-contact got %v", sinks(got(t, res)))
	}
}

// SetPolicy applies at once: a viewer no longer allowed gets nothing (and is
// not told); one newly allowed gets the current presence.
func TestViewSetPolicy(t *testing.T) {
	blockBob := policy(core.Exact)
	blockBob.Blocked["bob"] = true
	addFrank := policy(core.Exact)
	addFrank.Contacts["frank"] = true
	hideCarol := policy(core.Exact)
	hideCarol.HiddenFrom["carol"] = true

	tests := []struct {
		name  string
		pol   *core.Policy
		wantD map[string]messages.Status // deliveries of SetPolicy, alice online
		// then alice goes offline (debounce 0): who hears of it
		wantAfter []string
	}{
		{"block bob", blockBob, map[string]messages.Status{}, []string{"s-alice", "s-carol"}},
		{"add frank", addFrank, map[string]messages.Status{"s-frank": messages.Status_online}, []string{"s-alice", "s-bob", "s-carol", "s-frank"}},
		{"hide from carol", hideCarol, map[string]messages.Status{"s-carol": messages.Status_unknown}, []string{"s-alice", "s-bob"}},
		// Coarse viewers no longer see the platforms: told so, still online.
		{"coarse", policy(core.Coarse), map[string]messages.Status{"s-bob": messages.Status_online, "s-carol": messages.Status_online}, []string{"s-alice", "s-bob", "s-carol"}},
		{"hidden", policy(core.Hidden), map[string]messages.Status{"s-bob": messages.Status_unknown, "s-carol": messages.Status_unknown}, []string{"s-alice"}},
		{"no policy", nil, map[string]messages.Status{}, []string{"s-alice"}},
		{"no contacts", &core.Policy{Granularity: core.Exact}, map[string]messages.Status{}, []string{"s-alice"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := core.NewView("alice", 0, policy(core.Exact), time.Time{})
			v.DeviceUp("phone", hold("g1", "c1", 1), t0)
			for _, viewer := range []string{"alice", "bob", "carol", "frank"} {
				mustSubscribe(t, v, "s-"+viewer, viewer, t0)
			}
			d := got(t, v.SetPolicy(tc.pol, at(time.Second)))
			if v.Policy != tc.pol {
				t.Fatalf("policy not stored")
			}
			if !slices.Equal(sinks(d), slices.Sorted(maps.Keys(tc.wantD))) {
				t.Fatalf("SetPolicy delivered to %v, want %v", sinks(d), slices.Sorted(maps.Keys(tc.wantD)))
			}
			for sink, st := range tc.wantD {
				if d[sink].GetStatus() != st {
					t.Errorf("%s got %v, want %v", sink, d[sink], st)
				}
			}
			after := got(t, downAndFire(v, "phone", 1, at(time.Minute), at(time.Minute)))
			if !slices.Equal(sinks(after), tc.wantAfter) {
				t.Fatalf("offline delivered to %v, want %v", sinks(after), tc.wantAfter)
			}
		})
	}
}

// Idle: no device, no subscriber, no pending offline.
func TestViewIdle(t *testing.T) {
	h := hold("g1", "c1", 1)
	// upThenDown connects the phone with epoch 1 at t0 and, a second
	// later, ends the device's epoch given.
	upThenDown := func(v *core.View, epoch uint64) core.ViewResult {
		v.DeviceUp("phone", h, t0)
		return v.DeviceDown("phone", epoch, at(time.Second), at(time.Second))
	}
	// publish fires the debounce timer a device down armed.
	publish := func(v *core.View, down core.ViewResult) { v.DebounceFired(down.Debounce.Gen, down.Debounce.At) }
	tests := []struct {
		name string
		run  func(v *core.View)
		want bool
	}{
		{"new", func(*core.View) {}, true},
		{"subscribed", func(v *core.View) { v.Subscribe("s", "bob", t0) }, false},
		{"subscribed then unsubscribed", func(v *core.View) { v.Subscribe("s", "bob", t0); v.Unsubscribe("s") }, true},
		{"a device", func(v *core.View) { v.DeviceUp("phone", h, t0) }, false},
		{"device left, offline pending", func(v *core.View) { upThenDown(v, 1) }, false},
		{"device left, offline published", func(v *core.View) { publish(v, upThenDown(v, 1)) }, true},
		{"stale device down keeps the device", func(v *core.View) { upThenDown(v, 2) }, false},
		{"came back within the debounce", func(v *core.View) {
			upThenDown(v, 1)
			v.DeviceUp("phone", hold("g1", "c2", 2), at(2*time.Second))
		}, false},
		{"came back and left again, published", func(v *core.View) {
			upThenDown(v, 1)
			v.DeviceUp("phone", hold("g1", "c2", 2), at(2*time.Second))
			publish(v, v.DeviceDown("phone", 2, at(3*time.Second), at(3*time.Second)))
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newView(core.Exact)
			tc.run(v)
			if v.Idle() != tc.want {
				t.Fatalf("Idle = %v, want %v (devices %d subs %d online %v)", v.Idle(), tc.want, v.Devices.Len(), len(v.Subs), v.Online)
			}
		})
	}
}

// DeviceUp with an older epoch than the current device entry is ignored.
func TestViewDeviceUpEpochs(t *testing.T) {
	cur := hold("g2", "c5", 5)
	tests := []struct {
		name      string
		h         *messages.Holder
		wantStale bool
	}{
		{"older epoch is stale", hold("g1", "c4", 4), true},
		{"epoch 0 is stale", hold("g1", "c0", 0), true},
		{"same epoch is accepted (re-register)", hold("g3", "c5", 5), false},
		{"newer epoch replaces", hold("g1", "c6", 6), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newView(core.Exact)
			mustSubscribe(t, v, "s-bob", "bob", t0)
			v.DeviceUp("phone", cur, t0)
			version, flips := v.Version, v.DeviceFlips
			res := v.DeviceUp("phone", tc.h, at(time.Minute))
			if res.Stale != tc.wantStale || res.Published || len(res.Deliveries) != 0 {
				t.Fatalf("DeviceUp: %+v, want stale %v and nothing published", res, tc.wantStale)
			}
			want := tc.h
			if tc.wantStale {
				want = cur
			}
			if dev(&v.Devices, "phone").Holder != want {
				t.Fatalf("device entry %v, want %v", dev(&v.Devices, "phone").Holder, want)
			}
			if v.Version != version || v.DeviceFlips != flips || !dev(&v.Devices, "phone").Since.Equal(t0) {
				t.Fatalf("version %d->%d flips %d->%d since %v: want unchanged", version, v.Version, flips, v.DeviceFlips, dev(&v.Devices, "phone").Since)
			}
		})
	}
}

// DeviceDown with a wrong epoch (or an unknown device) is ignored.
func TestViewDeviceDownEpochs(t *testing.T) {
	tests := []struct {
		name      string
		device    string
		epoch     uint64
		wantStale bool
	}{
		{"older epoch", "phone", 4, true},
		{"newer epoch", "phone", 6, true},
		{"epoch 0", "phone", 0, true},
		{"unknown device", "tablet", 5, true},
		{"current epoch", "phone", 5, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newView(core.Exact)
			v.DeviceUp("phone", hold("g1", "c5", 5), t0)
			res := v.DeviceDown(tc.device, tc.epoch, at(time.Minute), at(time.Minute))
			if res.Stale != tc.wantStale {
				t.Fatalf("stale = %v, want %v", res.Stale, tc.wantStale)
			}
			if tc.wantStale {
				if res.Debounce != nil || v.Devices.Len() != 1 || v.Idle() || v.DeviceFlips != 1 {
					t.Fatalf("stale down changed the view: %+v devices %d flips %d", res, v.Devices.Len(), v.DeviceFlips)
				}
				return
			}
			if res.Debounce == nil || v.Devices.Len() != 0 {
				t.Fatalf("down: %+v devices %d, want a debounce and no device", res, v.Devices.Len())
			}
		})
	}
}

// The published last-seen never goes back, e.g. when a departure is older
// than the one loaded from the history store.
func TestViewLastSeenNeverGoesBack(t *testing.T) {
	stored := at(time.Hour)
	v := core.NewView("alice", 0, policy(core.Exact), stored)
	v.DeviceUp("phone", hold("g1", "c1", 1), at(2*time.Hour))
	downAndFire(v, "phone", 1, at(30*time.Minute), at(2*time.Hour))
	if !v.LastSeen.Equal(stored) {
		t.Fatalf("last seen %v, want %v kept", v.LastSeen, stored)
	}
	v.DeviceUp("phone", hold("g1", "c2", 2), at(3*time.Hour))
	downAndFire(v, "phone", 2, at(4*time.Hour), at(4*time.Hour))
	if !v.LastSeen.Equal(at(4 * time.Hour)) {
		t.Fatalf("last seen %v, want the later departure", v.LastSeen)
	}
}

// A coarse subscriber's "recently" turns into "long_ago" through Age, which
// Subscribe and publish schedule at last seen + 24 h + 1 min.
func TestViewCoarseAge(t *testing.T) {
	left := at(time.Hour)
	ageAt := left.Add(core.RecentWindow + time.Minute)
	v := core.NewView("alice", 0, policy(core.Coarse), left)

	p, res := v.Subscribe("s-bob", "bob", at(2*time.Hour))
	if p.GetStatus() != messages.Status_recently {
		t.Fatalf("subscribe: %v, want recently", p)
	}
	if res.Age == nil || !res.Age.Equal(ageAt) {
		t.Fatalf("age at %v, want %v", res.Age, ageAt)
	}
	// Too early: nothing changes, the age is still ahead.
	res = v.Age(left.Add(core.RecentWindow))
	if len(res.Deliveries) != 0 || res.Age == nil || !res.Age.Equal(ageAt) {
		t.Fatalf("early age: %+v", res)
	}
	res = v.Age(ageAt)
	if d := got(t, res); d["s-bob"].GetStatus() != messages.Status_long_ago || res.Age != nil {
		t.Fatalf("age: %+v, want long_ago and no further age", res)
	}
	if res := v.Age(ageAt.Add(time.Hour)); len(res.Deliveries) != 0 {
		t.Fatalf("second age delivered again: %+v", res)
	}

	for _, tc := range []struct {
		name string
		v    func() *core.View
	}{
		{"online", func() *core.View {
			v := core.NewView("alice", 0, policy(core.Coarse), left)
			v.DeviceUp("phone", hold("g1", "c1", 1), at(2*time.Hour))
			return v
		}},
		{"never seen", func() *core.View { return core.NewView("alice", 0, policy(core.Coarse), time.Time{}) }},
		{"already long ago", func() *core.View { return core.NewView("alice", 0, policy(core.Coarse), at(-48*time.Hour)) }},
	} {
		t.Run("no age when "+tc.name, func(t *testing.T) {
			if _, res := tc.v().Subscribe("s-bob", "bob", at(2*time.Hour)); res.Age != nil {
				t.Fatalf("age at %v, want none", res.Age)
			}
		})
	}
	t.Run("no age without subscribers", func(t *testing.T) {
		v := core.NewView("alice", 0, policy(core.Coarse), left)
		if res := v.Age(at(2 * time.Hour)); res.Age != nil {
			t.Fatalf("age at %v, want none", res.Age)
		}
	})
}

// SUSPECTED PRIVACY LEAK (core/view.go View.goOffline, core/privacy.go Trim):
// an invisible user appears offline to others, but when it really
// disconnects the debounce moves LastSeen to its departure and every exact
// contact is sent offline with the new last_seen_minute (a coarse contact
// may see long_ago -> recently): both reveal when the invisible user was
// online.
func TestViewInvisibleDepartureIsNotRevealed(t *testing.T) {
	v := core.NewView("alice", seedDebounce, policy(core.Exact), at(-48*time.Hour))
	v.SetShow(messages.Show_invisible, t0)
	before := mustSubscribe(t, v, "s-bob", "bob", t0)
	v.DeviceUp("phone", hold("g1", "c1", 1), t0)
	tm := v.DeviceDown("phone", 1, at(time.Hour), at(time.Hour)).Debounce
	if d := got(t, v.DebounceFired(tm.Gen, tm.At)); len(d) != 0 {
		t.Fatalf("bob was sent %v (before: %v): the invisible session leaked", d["s-bob"], before)
	}
}

// Changed marks every publish of a new version, whatever changed (the
// denominator of the fan-out amplification, presence_changes_total), and
// Published only the online/offline ones; a change no one sees publishes
// nothing.
func TestViewChangedMarksEveryPublish(t *testing.T) {
	v := newView(core.Exact)
	mustSubscribe(t, v, "s-bob", "bob", t0)
	steps := []struct {
		name               string
		do                 func() core.ViewResult
		changed, published bool
	}{
		{"online", func() core.ViewResult { return v.DeviceUp("phone", hold("g1", "c1", 1), t0) }, true, true},
		{"a second device", func() core.ViewResult { return v.DeviceUp("laptop", hold("g2", "l1", 1), at(time.Second)) }, true, false},
		{"show away", func() core.ViewResult { return v.SetShow(messages.Show_away, at(2*time.Second)) }, true, false},
		{"show away again", func() core.ViewResult { return v.SetShow(messages.Show_away, at(3*time.Second)) }, false, false},
		{"a status text", func() core.ViewResult {
			return v.SetStatus(core.UserStatus{Show: messages.Show_away, Text: "lunch", At: at(4 * time.Second)}, false, at(4*time.Second))
		}, true, false},
	}
	for _, s := range steps {
		res := s.do()
		if res.Changed != s.changed || res.Published != s.published {
			t.Errorf("%s: changed %v published %v, want %v %v", s.name, res.Changed, res.Published, s.changed, s.published)
		}
	}
}

// Subscribers trimmed alike share one presence per event (the fan-out
// groups by it and encodes it once): one per granularity and one for the
// user, each what Trim gives that viewer, and the versions alike.
func TestViewSharesOnePresencePerTrim(t *testing.T) {
	pol := policy(core.Exact)
	pol.CoarseFor = set("carol")
	v := core.NewView("alice", seedDebounce, pol, time.Time{})
	viewers := map[string]string{} // sink -> viewer
	for i, viewer := range []string{"bob", "carol", "dave", "alice", "mallory", "eve"} {
		for k := range 3 { // three sinks each: the class is the viewer's
			sink := "s" + string(rune('a'+i)) + string(rune('0'+k))
			mustSubscribe(t, v, sink, viewer, t0)
			viewers[sink] = viewer
		}
	}
	now := at(time.Minute)
	for _, step := range []struct {
		name string
		op   func() core.ViewResult
	}{
		{"device up", func() core.ViewResult { return v.DeviceUp("phone", hold("g1", "c1", 1), now) }},
		{"show invisible", func() core.ViewResult { return v.SetShow(messages.Show_invisible, now) }},
	} {
		d := got(t, step.op())
		byViewer := map[string]*messages.Presence{}
		distinct := map[*messages.Presence]bool{}
		for sink, p := range d {
			viewer := viewers[sink]
			if first, ok := byViewer[viewer]; ok && first != p {
				t.Errorf("%s: %s's sinks got different presences %p and %p", step.name, viewer, first, p)
			}
			byViewer[viewer] = p
			distinct[p] = true
			want := core.Trim(pol, viewer, v.Presence(now), now)
			want.Version = v.Version
			if !proto.Equal(p, want) {
				t.Errorf("%s: %s got %v, want %v", step.name, sink, p, want)
			}
		}
		if _, ok := byViewer["mallory"]; ok {
			t.Errorf("%s: mallory, not a contact, was delivered %v", step.name, byViewer["mallory"])
		}
		if _, ok := byViewer["eve"]; ok {
			t.Errorf("%s: eve, blocked, was delivered %v", step.name, byViewer["eve"])
		}
		if len(d) > 0 && len(distinct) != len(byViewer) {
			t.Errorf("%s: %d presences for %d viewers of distinct trims", step.name, len(distinct), len(byViewer))
		}
		if len(d) == 0 {
			t.Errorf("%s: delivered nothing", step.name)
		}
	}
}
