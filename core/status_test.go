package core_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

const (
	active     = messages.Activity_active
	idle       = messages.Activity_idle
	background = messages.Activity_background
	mobile     = messages.Platform_mobile
	desktop    = messages.Platform_desktop
	web        = messages.Platform_web
)

// declared is a holder of a device with a declared state: its activity since
// at, last active at last (0: never), as times after t0.
func declared(p messages.Platform, a messages.Activity, since, last time.Duration) *messages.Holder {
	h := &messages.Holder{Node: "g1", ConnId: "c-" + p.String() + a.String(), Epoch: 1, Platform: p, Activity: a, ActivityAtMs: at(since).UnixMilli(), StateGen: 1}
	if last >= 0 {
		h.LastActiveMs = at(last).UnixMilli()
	}
	return h
}

// The aggregation table of docs/protocol.md ("Status"): a show the user
// set wins; else any active device is available; else away, idle since
// the last of the devices stopped being active.
func TestDerive(t *testing.T) {
	now := at(time.Hour)
	set := func(show messages.Show, until time.Duration) core.UserStatus {
		u := core.UserStatus{Show: show, Text: "in a meeting", At: t0}
		if until != 0 {
			u.Until = at(until)
		}
		return u
	}
	tests := []struct {
		name      string
		set       core.UserStatus
		devices   []*messages.Holder
		show      messages.Show
		idleSince time.Time
		text      string
	}{
		{"nothing set, one device active", core.UserStatus{}, []*messages.Holder{declared(desktop, active, 0, 0)}, messages.Show_available, time.Time{}, ""},
		{"nothing set, active and background", core.UserStatus{}, []*messages.Holder{declared(mobile, background, 5*time.Minute, -1), declared(desktop, active, 0, 0)}, messages.Show_available, time.Time{}, ""},
		{"nothing set, all idle: away since the later stop", core.UserStatus{}, []*messages.Holder{declared(desktop, idle, 20*time.Minute, 10*time.Minute), declared(web, idle, 30*time.Minute, 15*time.Minute)}, messages.Show_away, at(15 * time.Minute), ""},
		{"nothing set, background never active: since it is so", core.UserStatus{}, []*messages.Holder{declared(mobile, background, 7*time.Minute, -1)}, messages.Show_away, at(7 * time.Minute), ""},
		{"nothing set, idle and background", core.UserStatus{}, []*messages.Holder{declared(mobile, background, 3*time.Minute, -1), declared(desktop, idle, 20*time.Minute, 10*time.Minute)}, messages.Show_away, at(10 * time.Minute), ""},
		{"nothing set, no device", core.UserStatus{}, nil, messages.Show_available, time.Time{}, ""},
		{"a device of an earlier version (no activity) is active", core.UserStatus{}, []*messages.Holder{{Node: "g1", ConnId: "c", Epoch: 1}}, messages.Show_available, time.Time{}, ""},
		{"dnd wins over an active device", set(messages.Show_dnd, 0), []*messages.Holder{declared(desktop, active, 0, 0)}, messages.Show_dnd, time.Time{}, "in a meeting"},
		{"available set wins over idle devices", set(messages.Show_available, 0), []*messages.Holder{declared(desktop, idle, 20*time.Minute, 10*time.Minute)}, messages.Show_available, time.Time{}, "in a meeting"},
		{"away set wins, no idle time", set(messages.Show_away, 0), []*messages.Holder{declared(desktop, active, 0, 0)}, messages.Show_away, time.Time{}, "in a meeting"},
		{"invisible set wins", set(messages.Show_invisible, 0), []*messages.Holder{declared(desktop, active, 0, 0)}, messages.Show_invisible, time.Time{}, "in a meeting"},
		{"a set show that expired is derived again", set(messages.Show_dnd, 30*time.Minute), []*messages.Holder{declared(desktop, idle, 20*time.Minute, 10*time.Minute)}, messages.Show_away, at(10 * time.Minute), ""},
		{"a set show not yet expired", set(messages.Show_dnd, 2*time.Hour), []*messages.Holder{declared(desktop, idle, 20*time.Minute, 10*time.Minute)}, messages.Show_dnd, time.Time{}, "in a meeting"},
		{"a text alone keeps the show derived", core.UserStatus{Text: "lunch", At: t0}, []*messages.Holder{declared(desktop, active, 0, 0)}, messages.Show_available, time.Time{}, "lunch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := core.Derive(tc.set, tc.devices, now)
			if d.Show != tc.show || !d.IdleSince.Equal(tc.idleSince) || d.Text != tc.text {
				t.Fatalf("Derive = %v idle since %v text %q, want %v %v %q", d.Show, d.IdleSince, d.Text, tc.show, tc.idleSince, tc.text)
			}
		})
	}
}

// Devices are ordered active, idle, background, then most recently active;
// a dirty one (its heartbeats drifted) last whatever it declares.
func TestByDeliverability(t *testing.T) {
	type named struct {
		name string
		h    *messages.Holder
	}
	dirty := declared(desktop, active, 0, 50*time.Minute)
	dirty.Dirty = true
	devs := []named{
		{"phone-bg", declared(mobile, background, 40*time.Minute, 30*time.Minute)},
		{"laptop", declared(desktop, active, 0, 10*time.Minute)},
		{"tablet-idle-old", declared(web, idle, 20*time.Minute, 5*time.Minute)},
		{"pc-dirty", dirty},
		{"tablet-idle-new", declared(web, idle, 25*time.Minute, 15*time.Minute)},
		{"desk-active-new", declared(desktop, active, 0, 20*time.Minute)},
		{"phone-bg-never", declared(mobile, background, 35*time.Minute, -1)},
	}
	slices.SortFunc(devs, func(a, b named) int { return core.ByDeliverability(a.name, a.h, b.name, b.h) })
	var order []string
	for _, d := range devs {
		order = append(order, d.name)
	}
	want := []string{"desk-active-new", "laptop", "tablet-idle-new", "tablet-idle-old", "phone-bg", "phone-bg-never", "pc-dirty"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
}

func TestForegroundAndPlatforms(t *testing.T) {
	tests := []struct {
		name                string
		devices             []*messages.Holder
		foreground, present bool
		platforms           []*messages.DevicePresence
	}{
		{"none", nil, false, false, nil},
		{"background only", []*messages.Holder{declared(mobile, background, 0, -1)}, false, false, []*messages.DevicePresence{{Platform: mobile, Activity: background}}},
		{"idle desktop, background phone", []*messages.Holder{declared(mobile, background, 0, -1), declared(desktop, idle, 0, 0)}, true, false,
			[]*messages.DevicePresence{{Platform: mobile, Activity: background}, {Platform: desktop, Activity: idle}}},
		{"two desktops: the most deliverable of them", []*messages.Holder{declared(desktop, idle, 0, 0), declared(desktop, active, 0, 0), declared(web, background, 0, -1)}, true, true,
			[]*messages.DevicePresence{{Platform: desktop, Activity: active}, {Platform: web, Activity: background}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fg, att := core.Foreground(tc.devices)
			if fg != tc.foreground || att != tc.present {
				t.Fatalf("Foreground = %v, %v; want %v, %v", fg, att, tc.foreground, tc.present)
			}
			got := core.Platforms(tc.devices)
			if !slices.EqualFunc(got, tc.platforms, func(a, b *messages.DevicePresence) bool {
				return a.GetPlatform() == b.GetPlatform() && a.GetActivity() == b.GetActivity()
			}) {
				t.Fatalf("Platforms = %v, want %v", got, tc.platforms)
			}
		})
	}
}

func TestValidStatus(t *testing.T) {
	now := at(0)
	tests := []struct {
		name    string
		show    messages.Show
		text    string
		expires int64
		rule    string // "" if valid
	}{
		{"show alone", messages.Show_dnd, "", 0, ""},
		{"auto with a text", messages.Show_auto, "lunch", 0, ""},
		{"140 characters of Chinese", messages.Show_away, strings.Repeat("忙", 140), at(time.Hour).UnixMilli(), ""},
		{"141 characters", messages.Show_away, strings.Repeat("a", 141), 0, "at most 140"},
		{"not UTF-8", messages.Show_away, "a\xffb", 0, "not valid UTF-8"},
		{"a control character", messages.Show_away, "a\x1b[31mred", 0, "control character"},
		{"expiry in the past", messages.Show_away, "", at(-time.Second).UnixMilli(), "not in the future"},
		{"expiry now", messages.Show_away, "", now.UnixMilli(), "not in the future"},
		{"negative expiry", messages.Show_away, "", -5, "not in the future"},
		{"no show", messages.Show_show_unspecified, "x", 0, "show must be"},
		{"a show outside the enum", messages.Show(42), "", 0, "show must be"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := core.ValidStatus(tc.show, tc.text, tc.expires, now)
			if tc.rule == "" {
				if err != nil {
					t.Fatalf("ValidStatus = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, core.ErrBadState) || !strings.Contains(err.Error(), tc.rule) {
				t.Fatalf("ValidStatus = %v, want ErrBadState naming %q", err, tc.rule)
			}
		})
	}
}

func TestParseDeviceParams(t *testing.T) {
	for in, want := range map[string]messages.Platform{"": messages.Platform_other, "mobile": mobile, "desktop": desktop, "web": web, "other": messages.Platform_other} {
		if p, err := core.ParsePlatform(in); err != nil || p != want {
			t.Errorf("ParsePlatform(%q) = %v, %v; want %v", in, p, err, want)
		}
	}
	for _, bad := range []string{"phone", "platform_unspecified", "Mobile", "1"} {
		if _, err := core.ParsePlatform(bad); !errors.Is(err, core.ErrBadState) {
			t.Errorf("ParsePlatform(%q) = %v, want ErrBadState", bad, err)
		}
	}
	for in, want := range map[string]messages.Activity{"": messages.Activity_activity_unspecified, "active": active, "idle": idle, "background": background} {
		if a, err := core.ParseActivity(in); err != nil || a != want {
			t.Errorf("ParseActivity(%q) = %v, %v; want %v", in, a, err, want)
		}
	}
	for _, bad := range []string{"away", "activity_unspecified", "2"} {
		if _, err := core.ParseActivity(bad); !errors.Is(err, core.ErrBadState) {
			t.Errorf("ParseActivity(%q) = %v, want ErrBadState", bad, err)
		}
	}
	for _, a := range []messages.Activity{0, 4, -1} {
		if err := core.ValidActivity(a); !errors.Is(err, core.ErrBadState) {
			t.Errorf("ValidActivity(%v) = %v, want ErrBadState", a, err)
		}
	}
}
