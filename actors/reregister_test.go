package actors

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// flakyDir is a Directory over the node's own that treats a connection's
// re-register (a LeaseAcquire without handshake) as ClusterDirectory treats
// a message to an identity whose owner died but is not yet declared dead:
// the call waits (proto.actor's activation request to the dead member times
// out after 5 s) and then the message is lost (Send) or answered with an
// error (Request). The first `fail` re-registers are treated so; later
// ones pass.
type flakyDir struct {
	Directory
	wait time.Duration // how long a failing call hangs first

	mu       sync.Mutex
	fail     int         // re-registers still to fail
	failedAt []time.Time // when each failing call began
	passed   int         // re-registers that reached the lease
	passedAt []time.Time // when each of them was sent
}

var errOwnerGone = errors.New("flakyDir: the identity's owner is gone")

// failing reports whether msg is a re-register that must fail, hanging
// for wait first; it counts those that pass.
func (d *flakyDir) failing(msg any) bool {
	acq, ok := msg.(*messages.LeaseAcquire)
	if !ok || acq.GetHandshake() {
		return false
	}
	d.mu.Lock()
	fail := d.fail > 0
	if fail {
		d.fail--
		d.failedAt = append(d.failedAt, time.Now())
	} else {
		d.passed++
		d.passedAt = append(d.passedAt, time.Now())
	}
	d.mu.Unlock()
	if fail {
		time.Sleep(d.wait)
	}
	return fail
}

func (d *flakyDir) Send(kind Kind, id string, msg any) {
	if !d.failing(msg) {
		d.Directory.Send(kind, id, msg)
	}
}

func (d *flakyDir) Request(ctx context.Context, kind Kind, id string, msg any) (any, error) {
	if d.failing(msg) {
		return nil, errOwnerGone
	}
	return d.Directory.Request(ctx, kind, id, msg)
}

func (d *flakyDir) counts() (failed []time.Time, passed int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.failedAt...), d.passed
}

// flakyEnv is a node whose directory is a flakyDir failing the first fail
// re-registers, hanging wait each.
func flakyEnv(t *testing.T, fail int, wait time.Duration) (*env, *flakyDir) {
	t.Helper()
	timing := config.Fast()
	timing.FailureDetection, timing.Settle = 2700*time.Millisecond, 1500*time.Millisecond
	var fd *flakyDir
	e := newEnvWith(t, Deps{Timing: timing}, seams{wrapDir: func(d Directory) Directory {
		fd = &flakyDir{Directory: d, wait: wait, fail: fail}
		return fd
	}})
	return e, fd
}

// A re-register whose lease is routed to a member that died (the second of
// two killed at once, not yet declared dead) must not hold its connection:
// heartbeats are still read, renewals still reach the lease, nothing is
// closed or reported offline, and the re-register is tried again until it
// reaches the lease. (Before, the connection actor sent it from its
// mailbox: for the 5 s the call hung, its renewals waited behind it, the
// lease expired and the device was reported offline.)
func TestReregisterStuckOnADeadOwnerHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fd := flakyEnv(t, 1, 5*time.Second)
		e.policy("alice", core.Exact, "bob")
		p := e.subscribe("alice", "bob")
		alice := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(2 * time.Second)
		e.n.root.Send(e.n.Gateway().pid, topologyChanged{})
		time.Sleep(time.Second) // the re-register is sent (after U[0, renew/2]) and hangs
		synctest.Wait()
		if failed, _ := fd.counts(); len(failed) != 1 {
			t.Fatalf("re-registers hanging = %d, want 1", len(failed))
		}
		renewals := testutil.ToFloat64(e.n.metrics.Renewals)
		alice.conn.Heartbeat(1, 0) // seq 1 again: the client restarted its counter
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := testutil.ToFloat64(e.n.metrics.ClientRestarts); n != 1 {
			t.Fatalf("heartbeats read while the re-register hangs: restarts = %v, want 1", n)
		}
		if n := testutil.ToFloat64(e.n.metrics.Renewals) - renewals; n < 2 {
			t.Fatalf("renewals while the re-register hangs = %v, want >= 2 (one per 600 ms)", n)
		}
		e.expectStatuses(p, 10*time.Second, "0s online")
		if code := alice.sock.closeCode(); code != 0 {
			t.Fatalf("alice's socket closed with %d", code)
		}
		if _, passed := fd.counts(); passed != 1 {
			t.Fatalf("re-registers that reached the lease = %d, want 1 (the retry)", passed)
		}
	})
}

// A re-register that fails at once (no member hosts the identity yet) is
// tried again with a growing back-off until it reaches the lease.
func TestReregisterRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fd := flakyEnv(t, 4, 0)
		e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(time.Second)
		e.n.root.Send(e.n.Gateway().pid, topologyChanged{})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		failed, passed := fd.counts()
		if len(failed) != 4 || passed != 1 {
			t.Fatalf("re-registers failed %d, passed %d; want 4 then 1", len(failed), passed)
		}
		// Each wait is drawn from [1/2, 1] of a base that doubles: the third
		// is longer than the first whatever the draws.
		if first, third := failed[1].Sub(failed[0]), failed[3].Sub(failed[2]); third <= first {
			t.Fatalf("retry waits %v ... %v: the back-off does not grow", first, third)
		}
	})
}

// A cascade of membership changes less than a propagation apart (a 2+2+1
// split declares members dead one by one, seconds apart) does not hold a
// connection's re-register back to the last of them: one goes out within
// a propagation and half a renewal of the first, before a view re-created
// then settles (Timing.Settle after it), and one after the last change
// reached every member; at most about two per change. (Before, each
// change postponed it: the first went out a propagation after the last.)
func TestReregisterNotPostponedByACascade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fd := flakyEnv(t, 0, 0)
		const prop, changes, gap = 600 * time.Millisecond, 8, 400 * time.Millisecond
		e.n.envs.conn.propagation = prop // the fast preset's gossip
		e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(time.Second)
		first, last := time.Now(), time.Time{}
		for range changes {
			last = time.Now()
			e.n.changedAt.Store(last.UnixNano())
			e.n.root.Send(e.n.Gateway().pid, topologyChanged{})
			time.Sleep(gap)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		fd.mu.Lock()
		at := append([]time.Time(nil), fd.passedAt...)
		fd.mu.Unlock()
		if len(at) == 0 {
			t.Fatal("no re-register reached the lease")
		}
		if due := first.Add(prop + e.n.deps.Timing.Renew/2); at[0].After(due) {
			t.Fatalf("first re-register %v after the first change, want within %v", at[0].Sub(first), due.Sub(first))
		}
		if end := at[len(at)-1]; end.Before(last.Add(prop)) {
			t.Fatalf("last re-register %v after the last change, want one after its propagation %v", end.Sub(last), prop)
		}
		if len(at) > 2*changes {
			t.Fatalf("%d re-registers for %d changes, want at most %d", len(at), changes, 2*changes)
		}
	})
}
