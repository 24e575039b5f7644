package core_test

import (
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// stateView is alice's view (exact) with bob subscribed, alice's phone in
// the background and laptop active, both up since t0.
func stateView(t *testing.T) (*core.View, *messages.Holder, *messages.Holder) {
	t.Helper()
	pol := policy(core.Exact)
	v := core.NewView("alice", seedDebounce, pol, time.Time{})
	phone := declared(mobile, background, 0, -1)
	laptop := declared(desktop, active, 0, 0)
	laptop.ConnId = "c-laptop"
	v.DeviceUp("phone", phone, t0)
	v.DeviceUp("laptop", laptop, t0)
	mustSubscribe(t, v, "s-bob", "bob", t0)
	return v, phone, laptop
}

// An activity change reaches the views as a newer holder of the same
// connection: exact viewers see the platforms and the derived show change;
// a change that alters nothing a viewer sees sends it nothing; an older
// state of the same connection is ignored.
func TestViewActivityChanges(t *testing.T) {
	v, phone, laptop := stateView(t)
	p := mustSubscribe(t, v, "s-bob2", "bob", t0)
	if p.GetShow() != messages.Show_available || len(p.GetDevices()) != 2 || p.GetIdleSinceMinute() != 0 {
		t.Fatalf("snapshot %v, want available on mobile and desktop", p)
	}
	if p.GetDevices()[0].GetPlatform() != mobile || p.GetDevices()[0].GetActivity() != background ||
		p.GetDevices()[1].GetPlatform() != desktop || p.GetDevices()[1].GetActivity() != active {
		t.Fatalf("platforms %v", p.GetDevices())
	}
	// The laptop lapses to idle at 10 min: away, idle since its last active.
	idleLaptop := declared(desktop, idle, 10*time.Minute, 0)
	idleLaptop.ConnId, idleLaptop.StateGen = laptop.ConnId, 2
	v0 := v.Version
	d := got(t, v.DeviceUp("laptop", idleLaptop, at(10*time.Minute)))
	if len(d) != 2 || d["s-bob"].GetShow() != messages.Show_away || d["s-bob"].GetIdleSinceMinute() != uint32(t0.Unix()/60) {
		t.Fatalf("laptop idle: %v", d)
	}
	if v.Version <= v0 {
		t.Fatalf("version %d after %d", v.Version, v0)
	}
	// The same state again (a re-register): nothing.
	if d := got(t, v.DeviceUp("laptop", idleLaptop, at(11*time.Minute))); len(d) != 0 {
		t.Fatalf("same state again delivered %v", d)
	}
	// An older state of the laptop's connection: ignored.
	if res := v.DeviceUp("laptop", laptop, at(12*time.Minute)); !res.Stale || len(res.Deliveries) != 0 {
		t.Fatalf("older state: %+v", res)
	}
	// The phone's background becomes idle: the platforms change, the show
	// does not.
	idlePhone := declared(mobile, idle, 13*time.Minute, -1)
	idlePhone.ConnId, idlePhone.StateGen = phone.ConnId, 2
	d = got(t, v.DeviceUp("phone", idlePhone, at(13*time.Minute)))
	if len(d) != 2 || d["s-bob"].GetDevices()[0].GetActivity() != idle || d["s-bob"].GetShow() != messages.Show_away {
		t.Fatalf("phone idle: %v", d)
	}
	// The laptop leaves: the phone alone (idle since 13 min, never active).
	d = got(t, v.DeviceDown("laptop", laptop.GetEpoch(), at(14*time.Minute), at(14*time.Minute)))
	if len(d) != 2 || len(d["s-bob"].GetDevices()) != 1 || d["s-bob"].GetStatus() != messages.Status_online ||
		d["s-bob"].GetIdleSinceMinute() != uint32(at(13*time.Minute).Unix()/60) {
		t.Fatalf("laptop down: %v", d)
	}
}

// Coarse viewers see the derived show and the text, never platforms or
// idle time, so an activity change that keeps the show sends them nothing.
func TestViewActivityCoarse(t *testing.T) {
	v := core.NewView("alice", seedDebounce, policy(core.Coarse), time.Time{})
	phone := declared(mobile, background, 0, -1)
	laptop := declared(desktop, active, 0, 0)
	laptop.ConnId = "c-laptop"
	v.DeviceUp("phone", phone, t0)
	v.DeviceUp("laptop", laptop, t0)
	p := mustSubscribe(t, v, "s-carol", "carol", t0)
	if len(p.GetDevices()) != 0 || p.GetShow() != messages.Show_available {
		t.Fatalf("coarse snapshot %v", p)
	}
	idlePhone := declared(mobile, idle, time.Minute, -1)
	idlePhone.ConnId, idlePhone.StateGen = phone.ConnId, 2
	if d := got(t, v.DeviceUp("phone", idlePhone, at(time.Minute))); len(d) != 0 {
		t.Fatalf("a change carol cannot see sent %v", d)
	}
	idleLaptop := declared(desktop, idle, 10*time.Minute, 0)
	idleLaptop.ConnId, idleLaptop.StateGen = laptop.ConnId, 2
	d := got(t, v.DeviceUp("laptop", idleLaptop, at(10*time.Minute)))
	if d["s-carol"].GetShow() != messages.Show_away || d["s-carol"].GetIdleSinceMinute() != 0 || len(d["s-carol"].GetDevices()) != 0 {
		t.Fatalf("coarse away: %v", d)
	}
	v.SetStatus(core.UserStatus{Show: messages.Show_dnd, Text: "focus", At: at(11 * time.Minute)}, false, at(11*time.Minute))
	if p := mustSubscribe(t, v, "s-carol2", "carol", at(11*time.Minute)); p.GetStatusText() != "focus" || p.GetShow() != messages.Show_dnd {
		t.Fatalf("coarse status text: %v", p)
	}
}

// What the user set wins until it expires; replays after a failover take
// the latest of the devices; auto clears it.
func TestViewUserStatus(t *testing.T) {
	v, _, _ := stateView(t)
	res := v.SetStatus(core.UserStatus{Show: messages.Show_dnd, Text: "focus", At: at(time.Minute), Until: at(time.Hour)}, false, at(time.Minute))
	d := got(t, res)
	if d["s-bob"].GetShow() != messages.Show_dnd || d["s-bob"].GetStatusText() != "focus" {
		t.Fatalf("dnd: %v", d)
	}
	if res.Expiry == nil || !res.Expiry.Equal(at(time.Hour)) {
		t.Fatalf("expiry %v, want at 1 h", res.Expiry)
	}
	// A replay of an older set (another device, after a failover) loses.
	if d := got(t, v.SetStatus(core.UserStatus{Show: messages.Show_away, At: t0}, true, at(2*time.Minute))); len(d) != 0 || v.Status.Show != messages.Show_dnd {
		t.Fatalf("an older replay won: %v, %v", d, v.Status)
	}
	// A set as it happens wins whatever its time says (a clock stepped back).
	if d := got(t, v.SetStatus(core.UserStatus{Show: messages.Show_away, At: t0}, false, at(3*time.Minute))); d["s-bob"].GetShow() != messages.Show_away {
		t.Fatalf("a live set lost: %v", d)
	}
	v.SetStatus(core.UserStatus{Show: messages.Show_dnd, Text: "focus", At: at(4 * time.Minute), Until: at(time.Hour)}, false, at(4*time.Minute))
	// Expired: derived again (the laptop is active: available), text gone.
	if d := got(t, v.StatusExpired(at(59*time.Minute))); len(d) != 0 {
		t.Fatalf("expired early: %v", d)
	}
	d = got(t, v.StatusExpired(at(time.Hour)))
	if d["s-bob"].GetShow() != messages.Show_available || d["s-bob"].GetStatusText() != "" {
		t.Fatalf("after expiry: %v", d)
	}
	// Auto clears a set show; the text stays if given.
	v.SetStatus(core.UserStatus{Show: messages.Show_away, At: at(61 * time.Minute)}, false, at(61*time.Minute))
	d = got(t, v.SetStatus(core.UserStatus{Show: messages.Show_auto, Text: "back soon", At: at(62 * time.Minute)}, false, at(62*time.Minute)))
	if d["s-bob"].GetShow() != messages.Show_available || d["s-bob"].GetStatusText() != "back soon" {
		t.Fatalf("auto: %v", d)
	}
}

// Statuses are ordered by the view: a set as it happens with a clock
// behind is stamped after the one it replaces, so a later replay of that
// one (a device that heard it, after a failover) loses to it; a cleared
// status keeps its stamp, and an older replay does not undo the clear.
func TestViewStatusOrder(t *testing.T) {
	v, _, _ := stateView(t)
	v.SetStatus(core.UserStatus{Show: messages.Show_dnd, Text: "focus", At: at(time.Minute)}, false, at(time.Minute))
	v.SetStatus(core.UserStatus{Show: messages.Show_away, At: at(30 * time.Second)}, false, at(2*time.Minute))
	if want := at(time.Minute + time.Millisecond); !v.Status.At.Equal(want) {
		t.Fatalf("a set with its clock behind stamped %v, want %v", v.Status.At, want)
	}
	v.SetStatus(core.UserStatus{Show: messages.Show_dnd, Text: "focus", At: at(time.Minute)}, true, at(3*time.Minute))
	if v.Status.Show != messages.Show_away {
		t.Fatalf("the replay of the replaced status won: %v", v.Status)
	}
	v.SetStatus(core.UserStatus{Show: messages.Show_auto, At: at(4 * time.Minute)}, false, at(4*time.Minute))
	v.SetStatus(core.UserStatus{Show: messages.Show_away, At: at(time.Minute + time.Millisecond)}, true, at(5*time.Minute))
	if v.Status.Show != messages.Show_show_unspecified || !v.Status.At.Equal(at(4*time.Minute)) {
		t.Fatalf("after a clear and an older replay: %v", v.Status)
	}
	// Nanoseconds are dropped: statuses travel in milliseconds.
	v.SetStatus(core.UserStatus{Show: messages.Show_dnd, At: at(5*time.Minute + 1)}, false, at(5*time.Minute))
	if !v.Status.At.Equal(at(5 * time.Minute)) {
		t.Fatalf("stamped %v, want whole milliseconds", v.Status.At)
	}
}

// Invisible set with an expiry: others see the user leave at the set and
// come back at the expiry.
func TestViewInvisibleExpires(t *testing.T) {
	v, _, _ := stateView(t)
	d := got(t, v.SetStatus(core.UserStatus{Show: messages.Show_invisible, At: at(time.Minute), Until: at(time.Hour)}, false, at(time.Minute)))
	if d["s-bob"].GetStatus() != messages.Status_offline || d["s-bob"].GetLastSeenMinute() != uint32(at(time.Minute).Unix()/60) {
		t.Fatalf("invisible: %v", d)
	}
	d = got(t, v.StatusExpired(at(time.Hour)))
	if d["s-bob"].GetStatus() != messages.Status_online || d["s-bob"].GetShow() != messages.Show_available {
		t.Fatalf("invisible expired: %v", d)
	}
}

// A contact in coarse_for sees coarse presence where the other contacts
// see exact: online and the show, no platforms, no idle time, no last
// seen minute.
func TestTrimCoarseFor(t *testing.T) {
	pol := policy(core.Exact)
	pol.CoarseFor = map[string]bool{"carol": true, "dave": true} // dave is hidden from: hidden wins
	p := core.Presence{User: "alice", Online: true, Show: messages.Show_away, Text: "lunch", IdleSince: at(-time.Hour),
		Devices: []*messages.DevicePresence{{Platform: mobile, Activity: background}}}
	bob, carol, dave := core.Trim(pol, "bob", p, t0), core.Trim(pol, "carol", p, t0), core.Trim(pol, "dave", p, t0)
	if len(bob.GetDevices()) != 1 || bob.GetIdleSinceMinute() == 0 || bob.GetStatusText() != "lunch" {
		t.Fatalf("bob (exact) sees %v", bob)
	}
	if carol.GetStatus() != messages.Status_online || carol.GetShow() != messages.Show_away || len(carol.GetDevices()) != 0 ||
		carol.GetIdleSinceMinute() != 0 || carol.GetStatusText() != "lunch" {
		t.Fatalf("carol (coarse_for) sees %v", carol)
	}
	if dave.GetStatus() != messages.Status_unknown || dave.GetStatusText() != "" {
		t.Fatalf("dave (hidden from) sees %v", dave)
	}
	p.Online, p.LastSeen = false, at(-time.Minute)
	if c := core.Trim(pol, "carol", p, t0); c.GetStatus() != messages.Status_recently || c.GetLastSeenMinute() != 0 {
		t.Fatalf("carol offline: %v", c)
	}
	if b := core.Trim(pol, "bob", p, t0); b.GetStatus() != messages.Status_offline || b.GetLastSeenMinute() == 0 || b.GetStatusText() != "" {
		t.Fatalf("bob offline: %v", b)
	}
}
