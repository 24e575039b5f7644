package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// An admin lookup of a user nobody has seen answers offline and leaves no
// view behind; a lookup of a user whose view holds something (a device, a
// subscriber, an idle view waiting out Timing.Idle) leaves it as it was.
func TestLookupOfUnknownUserLeavesNoView(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Fast())
		passivated := func() float64 { return testutil.ToFloat64(e.n.metrics.Passivations.WithLabelValues(string(KindView))) }
		query := func(user string) {
			t.Helper()
			st, err := e.n.Query(context.Background(), user)
			if err != nil || user == "nobody" && (st.GetOnline() || len(st.GetDevices()) != 0) {
				t.Fatalf("Query(%s) = %v, %v", user, st, err)
			}
			synctest.Wait()
		}
		for range 3 {
			query("nobody")
			if v := e.n.Counts()["view"]; v != 0 {
				t.Fatalf("views after looking up an unknown user = %d, want 0", v)
			}
		}
		if p := passivated(); p != 3 {
			t.Fatalf("view passivations = %v, want 3 (one per lookup)", p)
		}
		alice := e.connect(e.n.Gateway(), "alice", "phone", 1)
		e.subscribe("carol", "bob")
		query("alice")
		query("carol")
		alice.close()
		time.Sleep(time.Second) // past the debounce: alice's view is idle, waiting out Idle
		synctest.Wait()
		query("alice")
		if v := e.n.Counts()["view"]; v != 2 {
			t.Fatalf("views = %d, want alice's and carol's", v)
		}
		time.Sleep(e.n.deps.Timing.Idle)
		synctest.Wait()
		if v := e.n.Counts()["view"]; v != 1 {
			t.Fatalf("views after idle = %d, want carol's", v)
		}
	})
}

// A user has at most Limits.Devices devices online: the handshake of one
// more is refused with ErrTooManyDevices and writes nothing (no
// connection, no lease, no floor); a device online already reconnects,
// and one leaving makes room.
func TestDevicesPerUserLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvWith(t, Deps{Timing: config.Fast(), Limits: config.Limits{Devices: 2}})
		g := e.n.Gateway()
		e.connect(g, "alice", "phone", 1)
		laptop := e.connect(g, "alice", "laptop", 1)
		e.connect(g, "bob", "phone", 1) // another user's devices do not count
		synctest.Wait()
		before := e.n.Counts()
		_, err := e.tryConnect(g, "alice", "tablet", 7)
		if !errors.Is(err, ErrTooManyDevices) || !strings.Contains(err.Error(), "max-devices 2") {
			t.Fatalf("third device = %v, want ErrTooManyDevices naming max-devices 2", err)
		}
		synctest.Wait()
		if after := e.n.Counts(); after["connection"] != before["connection"] || after["lease"] != before["lease"] {
			t.Fatalf("counts %v -> %v after a refused handshake", before, after)
		}
		if r := testutil.ToFloat64(e.n.metrics.Refused.WithLabelValues(LimitDevices)); r != 1 {
			t.Fatalf("device refusals counted = %v, want 1", r)
		}
		if floor, _ := e.history.Floor(context.Background(), "alice", "tablet"); floor != 0 {
			t.Fatalf("tablet's floor = %d after a refused handshake, want 0", floor)
		}
		e.connect(g, "alice", "phone", 2) // a reconnect (supersedes attempt 1)
		laptop.close()
		synctest.Wait()
		if _, err := e.tryConnect(g, "alice", "tablet", 7); err != nil {
			t.Fatalf("tablet after the laptop left: %v", err)
		}
		st, err := e.n.Query(context.Background(), "alice")
		if err != nil || len(st.GetDevices()) != 2 {
			t.Fatalf("alice = %v, %v; want phone and tablet", st.GetDevices(), err)
		}
	})
}

// An admission holds its place for admitHold even in a view that has
// nothing else: the view does not passivate (and forget it) while the
// admitted device's handshake may still bring it up, so that a second
// device of a user limited to one is refused meanwhile; once the hold is
// over the view passivates.
func TestAdmissionOutlivesIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvWith(t, Deps{Timing: config.Fast(), Limits: config.Limits{Devices: 1}})
		if e.n.deps.Timing.Idle >= admitHold {
			t.Fatalf("idle %v not under admitHold %v: the test needs a view idle before the hold ends", e.n.deps.Timing.Idle, admitHold)
		}
		admit := func(device string) bool {
			t.Helper()
			ans, err := e.n.dir.Request(context.Background(), KindView, "alice", &messages.DeviceAdmit{User: "alice", Device: device, Limit: 1})
			if err != nil {
				t.Fatalf("admit %s: %v", device, err)
			}
			return ans.(*messages.DeviceAdmitted).GetOk()
		}
		if !admit("phone") {
			t.Fatal("phone refused by an empty view")
		}
		time.Sleep(e.n.deps.Timing.Idle + time.Second) // past idle, before the hold ends
		synctest.Wait()
		if v := e.n.Counts()["view"]; v != 1 {
			t.Fatalf("views while the phone's admission holds = %d, want 1", v)
		}
		if admit("tablet") {
			t.Fatal("tablet admitted while the phone's place is held (limit 1)")
		}
		time.Sleep(admitHold + e.n.deps.Timing.Idle)
		synctest.Wait()
		if v := e.n.Counts()["view"]; v != 0 {
			t.Fatalf("views after the hold and idle = %d, want 0", v)
		}
	})
}

// A handshake that fails after its admission (here a stale attempt the
// lease refuses) frees its place at once: the next device of a user
// limited to one gets in without waiting out the hold.
func TestFailedHandshakeFreesItsAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvWith(t, Deps{Timing: config.Fast(), Limits: config.Limits{Devices: 1}})
		g := e.n.Gateway()
		e.connect(g, "alice", "phone", 5).close()
		synctest.Wait()
		if _, err := e.tryConnect(g, "alice", "phone", 3); !errors.Is(err, ErrRefused) {
			t.Fatalf("phone's stale attempt = %v, want ErrRefused", err)
		}
		synctest.Wait()
		if _, err := e.tryConnect(g, "alice", "tablet", 1); err != nil {
			t.Fatalf("tablet after the phone's handshake failed: %v", err)
		}
	})
}

// Node.Stop hands every connection's release to its lease before it stops
// the leases: each lease handles the release queued in its mailbox (a
// lease stopped with a system message first dropped what was queued, in
// few enough runs that the test stops eight nodes to catch it).
func TestStopDeliversQueuedReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const nodes, devices = 8, 500
		for range nodes {
			e := newEnv(t, config.Fast())
			for i := range devices {
				e.connect(e.n.Gateway(), fmt.Sprintf("u%03d", i), "phone", 1)
			}
			synctest.Wait()
			handled := func() float64 { return testutil.ToFloat64(e.n.metrics.Messages.WithLabelValues(string(KindLease))) }
			before := handled()
			e.n.Stop()
			if got := handled() - before; got != devices {
				t.Fatalf("lease messages handled during Stop = %v, want %d (one release per connection)", got, devices)
			}
		}
	})
}
