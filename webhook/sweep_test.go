package webhook

import (
	"encoding/json"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// putRow writes a row of owner for ev, delivered or not.
func putRow(t *testing.T, st *store.MemoryHooks, key, owner string, ev Event, delivered bool) {
	t.Helper()
	b, _ := json.Marshal(ev)
	if err := st.PutHooks(t.Context(), []store.HookRow{{Endpoint: key, User: ev.User, Version: ev.Version, Owner: owner, Shard: shardOf(ev.User), AtMs: ev.AtMs, Body: b}}); err != nil {
		t.Fatal(err)
	}
	if delivered {
		if err := st.DoneHooks(t.Context(), key, []store.HookKey{{User: ev.User, Version: ev.Version, Keep: true}}); err != nil {
			t.Fatal(err)
		}
	}
}

var testKey = Endpoint{URL: "http://hooks.example/hook?token=x"}.Key()

// Rows a dead node left are claimed by the node that owns the users' views
// now, and delivered; rows of users it does not own, or of a live node,
// stay.
func TestOrphansClaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		st := store.NewMemoryHooks()
		for _, r := range []struct{ user, owner string }{{"alice", "n2"}, {"carol", "n2"}, {"dave", "n3"}} {
			putRow(t, st, testKey, r.owner, Event{User: r.user, Status: "offline", Version: 9, Devices: []Device{}}, false)
		}
		n := start(t, rc, st, owning(func(u string) bool { return u != "carol" }), aliveAre("n1", "n3"))
		settle(time.Second)
		if l := rc.latest(); len(l) != 1 || l["alice"] != 9 {
			t.Fatalf("delivered %v: want alice's alone (carol is not n1's, dave's node lives)", l)
		}
		if c := testutil.ToFloat64(n.m.claimed.WithLabelValues(n.label())); c != 1 {
			t.Fatalf("claimed %v", c)
		}
	})
}

// A dead node's delivered row says alice is online, but her view (on this
// node now) says offline: the change the dead node published and never
// wrote. The new owner tells the receiver, above the row's version; bob's
// row says what his view says, so he is not told again.
func TestClaimedRowsChecked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		st := store.NewMemoryHooks()
		phone := func(node string) []Device {
			return []Device{{Device: "phone", Platform: "mobile", Activity: "active", Node: node}}
		}
		putRow(t, st, testKey, "n2", Event{User: "alice", Status: "online", Version: 100, Show: "available", Devices: phone("n2")}, true)
		putRow(t, st, testKey, "n2", Event{User: "bob", Status: "online", Version: 3, Show: "available", Devices: phone("n1")}, true)
		n := start(t, rc, st)
		n.tr.set(&messages.ViewState{User: "bob", Online: true, Show: messages.Show_available, Version: 3,
			Devices: []*messages.DeviceState{{Device: "phone", Node: "n1", Platform: messages.Platform_mobile, Activity: messages.Activity_active}}})
		settle(time.Second)
		got := rc.got()
		if len(got) != 1 || got[0].User != "alice" || got[0].Status != "offline" || got[0].Reason != "owner_crash" || got[0].Version <= 100 {
			t.Fatalf("received %+v, want alice's offline alone above version 100", got)
		}
		if r := testutil.ToFloat64(n.m.rechecked.WithLabelValues(n.label())); r != 1 {
			t.Fatalf("rechecked %v, want 1", r)
		}
	})
}

// The check tells a claimed user's state at a version above the row's and
// raises her view's to it: her view's next change, published in the same
// millisecond, is above and reaches the receiver after it. (Had the check
// invented a version of the wall time, the view's next one could equal it,
// and the webhooks would drop it as not newer.)
func TestRecheckVersionBelowNextChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		st := store.NewMemoryHooks()
		row := uint64(time.Now().Add(-5 * time.Second).UnixMilli()) // written by n2 before it died
		putRow(t, st, testKey, "n2", Event{User: "alice", Status: "online", Version: row, Devices: []Device{}}, true)
		n := start(t, rc, st)
		settle(n.cfg.Limits.Sweep) // the first sweep: claimed, checked, told
		if r := testutil.ToFloat64(n.m.rechecked.WithLabelValues(n.label())); r != 1 {
			t.Fatalf("rechecked %v, want 1", r)
		}
		real := n.tr.publish("alice", true) // the same millisecond: fake time has not moved
		n.Changed(real)
		settle(time.Second)
		vs := rc.versions()["alice"]
		if len(vs) != 2 || vs[0] <= row || vs[1] != real.Version || vs[1] <= vs[0] {
			t.Fatalf("alice's versions %v: want the check's above %d, then the view's %d above it", vs, row, real.Version)
		}
		if got := rc.got(); got[1].Status != "online" {
			t.Fatalf("the receiver's latest is %+v, want the view's online", got[1])
		}
	})
}

// A node restarted under its name checks every row it owned before, a
// page a sweep, however many: here all of them say online and the views
// say offline, and every user is told.
func TestRestartRechecksEveryOwnRow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		st := store.NewMemoryHooks()
		const users = 2*sweepPage + 500
		before := time.Now().Add(-time.Minute).UnixMilli()
		for i := range users {
			putRow(t, st, testKey, "n1", Event{User: fmt.Sprintf("u%04d", i), Status: "online", Version: 10, AtMs: before, Devices: []Device{}}, true)
		}
		n := start(t, rc, st, withLimits(func(l *Limits) { l.MaxBatch = 100; l.MaxBacklog = 10 * users; l.MaxPending = 10 * users }))
		settle(10 * n.cfg.Limits.Sweep)
		if r := testutil.ToFloat64(n.m.rechecked.WithLabelValues(n.label())); r != users {
			t.Fatalf("rechecked %v of %d rows from before the restart", r, users)
		}
		settle(5 * time.Second)
		if l := rc.latest(); len(l) != users {
			t.Fatalf("%d users told, want %d", len(l), users)
		}
	})
}
