package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// openState connects a device that declares its platform and activity.
func (e *env) openState(user, dev string, p messages.Platform, a messages.Activity, class string) *device {
	e.t.Helper()
	d, err := e.open(e.n.Gateway(), OpenRequest{User: user, Device: dev, Attempt: 1, Platform: p, Activity: a, Class: class})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// last is the newest event a probe saw.
func (p *probe) last() *messages.Presence {
	ev := p.all()
	if len(ev) == 0 {
		return nil
	}
	return ev[len(ev)-1].p
}

// alice's phone in the background and laptop active: bob (exact) sees her
// available on both platforms, the route puts the laptop first; when the
// laptop stops declaring active it turns idle after idle-after: bob sees
// away with the idle minute, the route has no attended device left; an
// activity that changes nothing bob sees sends him nothing.
func TestDeviceStateDrivesShowAndRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e, bob := watchedAlice(t, timing)
		phone := e.openState("alice", "phone", messages.Platform_mobile, messages.Activity_background, "")
		laptop := e.openState("alice", "laptop", messages.Platform_desktop, messages.Activity_active, "")
		time.Sleep(timing.Heartbeat)
		synctest.Wait()
		p := bob.last()
		if p.GetShow() != messages.Show_available || len(p.GetDevices()) != 2 {
			t.Fatalf("bob sees %v, want available on two platforms", p)
		}
		st, _ := e.n.Query(context.Background(), "alice")
		if len(st.Devices) != 2 || st.Devices[0].GetDevice() != "laptop" || !st.GetForeground() || !st.GetAttended() {
			t.Fatalf("route %v, want the laptop first, attended", st)
		}
		events := len(bob.all())
		phone.conn.SetActivity(messages.Activity_background) // no change
		time.Sleep(timing.IdleAfter / 2)
		laptop.conn.SetActivity(messages.Activity_active) // a renewal: nothing to tell
		synctest.Wait()
		if n := len(bob.all()); n != events {
			t.Fatalf("a renewal or a same activity sent bob %d events", n-events)
		}
		renewed := time.Now()
		time.Sleep(timing.IdleAfter - time.Millisecond)
		synctest.Wait()
		if bob.last().GetShow() != messages.Show_available {
			t.Fatalf("away before idle-after from the last renewal: %v", bob.last())
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		p = bob.last()
		if p.GetShow() != messages.Show_away || p.GetIdleSinceMinute() != uint32(renewed.Unix()/60) || p.GetStatus() != messages.Status_online {
			t.Fatalf("bob sees %v, want away idle since %d", p, renewed.Unix()/60)
		}
		st, _ = e.n.Query(context.Background(), "alice")
		if st.Devices[0].GetActivity() != messages.Activity_idle || !st.GetForeground() || st.GetAttended() {
			t.Fatalf("route %v, want the idle laptop first, in the foreground, unattended", st)
		}
		// Back at the keyboard: available again, the versions growing.
		v := p.GetVersion()
		laptop.conn.SetActivity(messages.Activity_active)
		synctest.Wait()
		if p := bob.last(); p.GetShow() != messages.Show_available || p.GetVersion() <= v {
			t.Fatalf("back: %v after version %d", p, v)
		}
		phone.close()
		laptop.close()
	})
}

// A device of an earlier client declares nothing: active for as long as
// it is connected, never lapsing.
func TestUndeclaredDeviceStaysActive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e, bob := watchedAlice(t, timing)
		d := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(3 * timing.IdleAfter)
		synctest.Wait()
		if got := e.statuses(bob); len(got) != 1 || bob.last().GetShow() != messages.Show_available {
			t.Fatalf("events %v (%v), want one online, available", got, bob.last())
		}
		d.close()
	})
}

// A set_status with a text and an expiry: seen until it expires, then the
// show is derived again; each device's status is told again after a
// re-register as a replay.
func TestStatusTextExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e, bob := watchedAlice(t, timing)
		d := e.openState("alice", "laptop", messages.Platform_desktop, messages.Activity_active, "")
		synctest.Wait()
		d.conn.SetStatus(messages.Show_dnd, "in a meeting", time.Now().Add(time.Second).UnixMilli())
		synctest.Wait()
		if p := bob.last(); p.GetShow() != messages.Show_dnd || p.GetStatusText() != "in a meeting" {
			t.Fatalf("bob sees %v", p)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if p := bob.last(); p.GetShow() != messages.Show_available || p.GetStatusText() != "" {
			t.Fatalf("after the expiry bob sees %v", p)
		}
		d.close()
	})
}

// The battery class beats BatteryFactor times less often and goes stale
// as much later: silent for longer than the standard stale it stays; for
// longer than its own it is closed, its half-open counted by platform.
func TestBatteryClassStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e, _ := watchedAlice(t, timing)
		d := e.openState("alice", "phone", messages.Platform_mobile, messages.Activity_background, config.ClassBattery)
		battery, _ := timing.Class(config.ClassBattery)
		synctest.Wait() // the connection actor counts it once active
		if testutil.ToFloat64(e.n.metrics.Connections.WithLabelValues("mobile", "battery")) != 1 {
			t.Fatal("the battery connection is not counted")
		}
		d.halt()
		time.Sleep(2 * timing.Stale)
		synctest.Wait()
		if d.sock.closeCode() != 0 {
			t.Fatalf("closed %v after twice the standard stale; its class's is %v", d.sock.closeCode(), battery.Stale)
		}
		time.Sleep(battery.Stale)
		synctest.Wait()
		if d.sock.closeCode() != messages.CloseGoingAway {
			t.Fatalf("close %v after the battery stale", d.sock.closeCode())
		}
		if n := testutil.ToFloat64(e.n.metrics.HalfOpen.WithLabelValues("mobile")); n != 1 {
			t.Fatalf("half-open closes by platform = %v, want 1", n)
		}
		if testutil.ToFloat64(e.n.metrics.Connections.WithLabelValues("mobile", "battery")) != 0 {
			t.Fatal("a closed connection still counted")
		}
	})
}

// driftAlice is alice's laptop whose heartbeats go backwards three times
// in a row (her own loop halted): the fuse trips.
func driftAlice(t *testing.T) (*env, *device, *probe) {
	t.Helper()
	e, bob := watchedAlice(t, config.Fast())
	d := e.openState("alice", "laptop", messages.Platform_desktop, messages.Activity_active, "")
	e.openState("alice", "phone", messages.Platform_mobile, messages.Activity_background, "")
	d.halt()
	now := time.Now().UnixMilli()
	for i, seq := range []uint64{10, 9, 8, 7} {
		d.conn.Heartbeat(seq, now+int64(i))
	}
	synctest.Wait()
	return e, d, bob
}

// stateSyncRequest is the nonce of the state sync a device was asked for.
func stateSyncRequest(t *testing.T, d *device) string {
	t.Helper()
	for _, f := range d.sock.sent() {
		if r := f.GetStateSyncRequest(); r != nil {
			return r.GetNonce()
		}
	}
	t.Fatalf("no state_sync_request in %v", d.sock.sent())
	return ""
}

// Seed 002 §4.3: a drifted connection is routed to last (dirty) and asked
// for its state; a wrong nonce is refused and changes nothing; the right
// one makes it clean with the activity it declares.
func TestDriftFuseSynced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, d, _ := driftAlice(t)
		nonce := stateSyncRequest(t, d)
		st, _ := e.n.Query(context.Background(), "alice")
		if last := st.Devices[len(st.Devices)-1]; last.GetDevice() != "laptop" || !last.GetDirty() {
			t.Fatalf("route %v, want the dirty laptop last", st.Devices)
		}
		d.conn.StateSync("not-it", messages.Activity_active)
		synctest.Wait()
		if f := d.sock.sent(); f[len(f)-1].GetError().GetCode() != 400 {
			t.Fatalf("a wrong nonce got %v", f[len(f)-1])
		}
		if st, _ := e.n.Query(context.Background(), "alice"); !st.Devices[len(st.Devices)-1].GetDirty() {
			t.Fatal("a wrong nonce cleaned the connection")
		}
		d.conn.StateSync(nonce, messages.Activity_idle)
		synctest.Wait()
		st, _ = e.n.Query(context.Background(), "alice")
		if st.Devices[0].GetDevice() != "laptop" || st.Devices[0].GetDirty() || st.Devices[0].GetActivity() != messages.Activity_idle {
			t.Fatalf("after the sync %v, want the clean idle laptop first", st.Devices)
		}
		for _, o := range []string{FuseTripped, FuseSynced} {
			if n := testutil.ToFloat64(e.n.metrics.Fuses.WithLabelValues("desktop", o)); n != 1 {
				t.Fatalf("fuses %s = %v, want 1", o, n)
			}
		}
		d.conn.Heartbeat(1, time.Now().UnixMilli()) // a new run, and alive past the sync's time
		time.Sleep(e.n.deps.Timing.StateSync + 50*time.Millisecond)
		synctest.Wait()
		if d.sock.closeCode() != 0 {
			t.Fatalf("closed %v after a valid sync", d.sock.closeCode())
		}
	})
}

// No valid answer within Timing.StateSync: closed with 4409, the lease
// released, the user still online on its other device.
func TestDriftFuseUnanswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, d, bob := driftAlice(t)
		stateSyncRequest(t, d)
		time.Sleep(e.n.deps.Timing.StateSync - time.Millisecond)
		synctest.Wait()
		if d.sock.closeCode() != 0 {
			t.Fatal("closed before its time")
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if d.sock.closeCode() != messages.CloseStateSync {
			t.Fatalf("close %v, want %v", d.sock.closeCode(), messages.CloseStateSync)
		}
		st, _ := e.n.Query(context.Background(), "alice")
		if len(st.Devices) != 1 || st.Devices[0].GetDevice() != "phone" {
			t.Fatalf("devices %v, want the phone alone", st.Devices)
		}
		if p := bob.last(); p.GetStatus() != messages.Status_online || p.GetShow() != messages.Show_away {
			t.Fatalf("bob sees %v, want online and away (the phone in the background)", p)
		}
		if n := testutil.ToFloat64(e.n.metrics.Fuses.WithLabelValues("desktop", FuseClosed)); n != 1 {
			t.Fatalf("closed fuses = %v", n)
		}
	})
}

// Bad input on the handshake's request: an unknown class leaves nothing.
func TestOpenRefusesAnUnknownClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Fast())
		_, err := e.open(e.n.Gateway(), OpenRequest{User: "alice", Device: "phone", Attempt: 1, Class: "turbo"})
		if err == nil {
			t.Fatal("an unknown class was accepted")
		}
		if c := e.n.Counts(); c[string(KindConnection)] != 0 || c[string(KindLease)] != 0 {
			t.Fatalf("a refused open left %v", c)
		}
		if !errors.Is(err, core.ErrBadState) {
			t.Fatalf("err %v, want ErrBadState", err)
		}
	})
}

// Each fuse is logged once, with the heartbeats before and after the run
// and its cause, and counted once: more drifting heartbeats while the
// state sync is under way log and count nothing more.
func TestDriftFuseLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		e := newEnvWith(t, Deps{Timing: config.Fast(), Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		d := e.openState("alice", "laptop", messages.Platform_desktop, messages.Activity_active, "")
		d.halt()
		ts := time.Now().UnixMilli()
		for i, seq := range []uint64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1} { // three runs out of order
			d.conn.Heartbeat(seq, ts+int64(i))
		}
		synctest.Wait()
		var lines []string
		for l := range strings.Lines(buf.String()) {
			if strings.Contains(l, "heartbeats drifted") {
				lines = append(lines, l)
			}
		}
		want := []string{"user=alice", "device=laptop", fmt.Sprintf(`before="seq 10 client_ts_ms %d"`, ts), fmt.Sprintf(`after="seq 7 client_ts_ms %d"`, ts+3), "cause=seq"}
		if len(lines) != 1 {
			t.Fatalf("fuse logged %d times, want once: %q", len(lines), lines)
		}
		for _, w := range want {
			if !strings.Contains(lines[0], w) {
				t.Errorf("fuse log %q lacks %s", lines[0], w)
			}
		}
		if n := testutil.ToFloat64(e.n.metrics.Fuses.WithLabelValues("desktop", FuseTripped)); n != 1 {
			t.Fatalf("fuses tripped = %v, want 1", n)
		}
		d.conn.Closed()
	})
}

// Heartbeats are counted by their connection's platform; a Ping or Pong
// (seq 0) is a sign of life, not a heartbeat.
func TestHeartbeatsCountedByPlatform(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Fast())
		phone := e.openState("alice", "phone", messages.Platform_mobile, messages.Activity_background, "")
		laptop := e.openState("alice", "laptop", messages.Platform_desktop, messages.Activity_active, "")
		phone.halt()
		laptop.halt()
		for seq := range uint64(3) {
			phone.conn.Heartbeat(seq+1, 0)
		}
		laptop.conn.Heartbeat(1, 0)
		laptop.conn.Heartbeat(0, 0)
		synctest.Wait()
		for platform, want := range map[string]float64{"mobile": 3, "desktop": 1, "web": 0, "other": 0} {
			if n := testutil.ToFloat64(e.n.metrics.Heartbeats.WithLabelValues(platform)); n != want {
				t.Errorf("heartbeats{platform=%s} = %v, want %v", platform, n, want)
			}
		}
		phone.conn.Closed()
		laptop.conn.Closed()
	})
}
