package core_test

import (
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

func set(ids ...string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// policy is alice's policy: bob, carol, dave and eve are contacts, eve is
// also blocked, dave is hidden from; mallory is nobody.
func policy(g core.Granularity) *core.Policy {
	return &core.Policy{
		Granularity: g,
		Contacts:    set("bob", "carol", "dave", "eve"),
		Blocked:     set("eve", "mallory2"),
		HiddenFrom:  set("dave"),
	}
}

// want is the expected trimmed presence; nil means Trim returns nil.
type want struct {
	status messages.Status
	show   messages.Show
	minute uint32
}

func TestTrim(t *testing.T) {
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	left := time.Date(2026, 3, 14, 11, 42, 0, 0, time.UTC) // 18 min ago
	leftMinute := uint32(left.Unix() / 60)

	online := core.Presence{User: "alice", Online: true, LastSeen: left.Add(-time.Hour), Show: messages.Show_away}
	offline := core.Presence{User: "alice", LastSeen: left, Show: messages.Show_available}
	neverSeen := core.Presence{User: "alice", Show: messages.Show_available}
	invisible := core.Presence{User: "alice", Online: true, LastSeen: left, Show: messages.Show_invisible}
	offlineAgo := func(d time.Duration) core.Presence {
		return core.Presence{User: "alice", LastSeen: now.Add(-d), Show: messages.Show_available}
	}

	tests := []struct {
		name   string
		pol    *core.Policy
		viewer string
		p      core.Presence
		want   *want
	}{
		// Who sees anything at all.
		{"no policy: nothing", nil, "bob", online, nil},
		{"no policy, offline: nothing", nil, "bob", offline, nil},
		{"non-contact: nothing", policy(core.Exact), "mallory", online, nil},
		{"empty viewer: nothing", policy(core.Exact), "", online, nil},
		{"blocked and a contact: nothing (not offline)", policy(core.Exact), "eve", online, nil},
		{"blocked and a contact, offline: nothing (not offline)", policy(core.Exact), "eve", offline, nil},
		{"blocked, not a contact: nothing", policy(core.Exact), "mallory2", online, nil},
		{"blocked under hidden granularity: nothing (not unknown)", policy(core.Hidden), "eve", online, nil},
		{"contacts nil map: nothing", &core.Policy{Granularity: core.Exact}, "bob", online, nil},

		// hidden_from and hidden granularity: unknown, whatever the state.
		{"hidden_from, online: unknown", policy(core.Exact), "dave", online, &want{status: messages.Status_unknown}},
		{"hidden_from, offline: unknown", policy(core.Coarse), "dave", offline, &want{status: messages.Status_unknown}},
		{"hidden granularity, online: unknown", policy(core.Hidden), "bob", online, &want{status: messages.Status_unknown}},
		{"hidden granularity, offline: unknown", policy(core.Hidden), "bob", offline, &want{status: messages.Status_unknown}},
		{"hidden granularity, invisible: unknown", policy(core.Hidden), "bob", invisible, &want{status: messages.Status_unknown}},

		// Exact.
		{"exact online: online and show, no minute", policy(core.Exact), "bob", online, &want{messages.Status_online, messages.Show_away, 0}},
		{"exact offline: last-seen minute", policy(core.Exact), "bob", offline, &want{status: messages.Status_offline, minute: leftMinute}},
		{"exact offline never seen: no minute", policy(core.Exact), "bob", neverSeen, &want{status: messages.Status_offline}},
		{"exact offline 3 days ago: still exact", policy(core.Exact), "carol", offlineAgo(72 * time.Hour),
			&want{status: messages.Status_offline, minute: uint32(now.Add(-72*time.Hour).Unix() / 60)}},

		// Coarse.
		{"coarse online: online and show", policy(core.Coarse), "bob", online, &want{messages.Status_online, messages.Show_away, 0}},
		{"coarse offline 18 min: recently", policy(core.Coarse), "bob", offline, &want{status: messages.Status_recently}},
		{"coarse offline exactly 24 h: recently", policy(core.Coarse), "bob", offlineAgo(24 * time.Hour), &want{status: messages.Status_recently}},
		{"coarse offline 24 h + 1 ns: long_ago", policy(core.Coarse), "bob", offlineAgo(24*time.Hour + time.Nanosecond), &want{status: messages.Status_long_ago}},
		{"coarse offline 30 days: long_ago", policy(core.Coarse), "bob", offlineAgo(30 * 24 * time.Hour), &want{status: messages.Status_long_ago}},
		{"coarse never seen: long_ago", policy(core.Coarse), "bob", neverSeen, &want{status: messages.Status_long_ago}},

		// show=invisible appears offline to others, online to the user.
		{"invisible to an exact contact: offline with the minute", policy(core.Exact), "bob", invisible, &want{status: messages.Status_offline, minute: leftMinute}},
		{"invisible to a coarse contact: recently", policy(core.Coarse), "bob", invisible, &want{status: messages.Status_recently}},
		{"invisible to itself: online", policy(core.Exact), "alice", invisible, &want{messages.Status_online, messages.Show_invisible, 0}},
		{"invisible and offline to itself: offline", policy(core.Exact), "alice",
			core.Presence{User: "alice", LastSeen: left, Show: messages.Show_invisible}, &want{status: messages.Status_offline, minute: leftMinute}},

		// A user always sees itself exactly.
		{"self without a policy, online", nil, "alice", online, &want{messages.Status_online, messages.Show_away, 0}},
		{"self without a policy, offline", nil, "alice", offline, &want{status: messages.Status_offline, minute: leftMinute}},
		{"self under hidden granularity", policy(core.Hidden), "alice", offline, &want{status: messages.Status_offline, minute: leftMinute}},
		{"self under coarse, long ago: exact minute", policy(core.Coarse), "alice", offlineAgo(72 * time.Hour),
			&want{status: messages.Status_offline, minute: uint32(now.Add(-72*time.Hour).Unix() / 60)}},
		{"self even if listed as blocked and hidden", &core.Policy{Granularity: core.Exact, Blocked: set("alice"), HiddenFrom: set("alice")}, "alice", online,
			&want{messages.Status_online, messages.Show_away, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := core.Trim(tc.pol, tc.viewer, tc.p, now)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("Trim = %v, want nil (distinct from offline)", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("Trim = nil, want %+v", *tc.want)
			}
			if got.GetUser() != "alice" || got.GetStatus() != tc.want.status || got.GetShow() != tc.want.show ||
				got.GetLastSeenMinute() != tc.want.minute || got.GetVersion() != 0 {
				t.Fatalf("Trim = %v, want user alice %+v version 0", got, *tc.want)
			}
		})
	}
}

// exact shows last_seen_minute = unix seconds / 60: minutes, never seconds.
// A departure at hh:mm:59 gives the same minute as one at hh:mm:00.
func TestTrimLastSeenIsWholeMinutes(t *testing.T) {
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	base := time.Date(2026, 3, 14, 11, 17, 0, 0, time.UTC)
	wantMinute := uint32(base.Unix() / 60)
	for _, tc := range []struct {
		name     string
		lastSeen time.Time
		want     uint32
	}{
		{"hh:mm:00", base, wantMinute},
		{"hh:mm:00.000000001", base.Add(time.Nanosecond), wantMinute},
		{"hh:mm:30", base.Add(30 * time.Second), wantMinute},
		{"hh:mm:59", base.Add(59 * time.Second), wantMinute},
		{"hh:mm:59.999999999", base.Add(time.Minute - time.Nanosecond), wantMinute},
		{"hh:mm+1:00", base.Add(time.Minute), wantMinute + 1},
		{"hh:mm:59 in another zone", base.Add(59 * time.Second).In(time.FixedZone("UTC+8", 8*3600)), wantMinute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := core.Presence{User: "alice", LastSeen: tc.lastSeen, Show: messages.Show_available}
			for _, viewer := range []string{"bob", "alice"} {
				got := core.Trim(policy(core.Exact), viewer, p, now)
				if got.GetLastSeenMinute() != tc.want {
					t.Errorf("viewer %s: minute = %d, want %d", viewer, got.GetLastSeenMinute(), tc.want)
				}
				if uint64(got.GetLastSeenMinute()) == uint64(tc.lastSeen.Unix()) {
					t.Errorf("viewer %s: last seen leaked in seconds", viewer)
				}
			}
		})
	}
}

// Coarse and hidden never leak the last-seen time; online never carries it.
func TestTrimNoMinuteOutsideExactOffline(t *testing.T) {
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	p := core.Presence{User: "alice", LastSeen: now.Add(-time.Hour), Show: messages.Show_dnd}
	for _, g := range []core.Granularity{core.Coarse, core.Hidden} {
		for _, online := range []bool{false, true} {
			p.Online = online
			if got := core.Trim(policy(g), "bob", p, now); got.GetLastSeenMinute() != 0 {
				t.Errorf("%s online=%v: minute %d leaked", g, online, got.GetLastSeenMinute())
			}
		}
	}
	p.Online = true
	if got := core.Trim(policy(core.Exact), "bob", p, now); got.GetLastSeenMinute() != 0 {
		t.Errorf("exact online: minute %d, want 0", got.GetLastSeenMinute())
	}
}

// Trim returns a fresh message each call: a caller setting its Version does
// not change another's.
func TestTrimReturnsFreshMessages(t *testing.T) {
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	p := core.Presence{User: "alice", Online: true, Show: messages.Show_available}
	a := core.Trim(policy(core.Exact), "bob", p, now)
	b := core.Trim(policy(core.Exact), "bob", p, now)
	if a == b {
		t.Fatal("Trim returned the same message twice")
	}
}
