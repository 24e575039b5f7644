package actors

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// With the gateway's deadlines (only due connections are told to check), a
// silent connection is still closed within stale + check of its last
// heartbeat and not before stale, and the live ones next to it never are,
// over many stale periods, whether they went silent early or late.
func TestStaleFoundInTimeLiveNever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		e := newEnv(t, timing)
		var live []*device
		for i := range 20 {
			live = append(live, e.connect(e.n.Gateway(), fmt.Sprintf("live%02d", i), "phone", 1))
		}
		type silent struct {
			d    *device
			left time.Time
		}
		var gone []silent
		for i, after := range []time.Duration{0, timing.Heartbeat / 2, 7 * timing.Stale / 3, 10 * timing.Stale} {
			d := e.connect(e.n.Gateway(), fmt.Sprintf("silent%d", i), "phone", 1)
			time.Sleep(after)
			d.halt()
			gone = append(gone, silent{d, time.Now()})
		}
		time.Sleep(3*timing.Stale + timing.Check)
		synctest.Wait()
		for i, s := range gone {
			at := s.d.sock.closedAt()
			if s.d.sock.closeCode() != messages.CloseGoingAway || at.IsZero() {
				t.Fatalf("silent%d: closed %d at %v, want %d", i, s.d.sock.closeCode(), at, messages.CloseGoingAway)
			}
			// Its last heartbeat was at most a heartbeat before it left.
			if lat := at.Sub(s.left); lat > timing.Stale+timing.Check || lat < timing.Stale-timing.Heartbeat {
				t.Fatalf("silent%d closed %v after it went silent, want within [stale - heartbeat, stale + check] = [%v, %v]",
					i, lat, timing.Stale-timing.Heartbeat, timing.Stale+timing.Check)
			}
		}
		for _, d := range live {
			if c := d.sock.closeCode(); c != 0 {
				t.Fatalf("%s: a live connection was closed with %d", d.user, c)
			}
		}
		// Only the silent ones were told to check, each a few times (until
		// stale, then once more per check while a heartbeat was in flight):
		// not every connection every check.
		checks := testutil.ToFloat64(e.n.metrics.StaleChecks)
		if every := float64(len(live)) * float64(time.Since(e.start)/timing.Check); checks < float64(len(gone)) || checks > float64(3*len(gone)) {
			t.Fatalf("%v staleness checks, want %d to %d (telling every connection every check: %v)", checks, len(gone), 3*len(gone), every)
		}
		if n := e.n.Gateway().conns.Load(); n != int64(len(live)) {
			t.Fatalf("gateway knows %d connections, want the %d live", n, len(live))
		}
	})
}

// Heartbeats leave their time in the connection's atomic, with no message
// to its actor; only a seq that does not grow reaches the actor, which
// counts a client restart. A device beating seqs 5, 6, 1, 2 is one restart
// and stays live; gone silent, it is closed past stale and last seen at its
// last heartbeat.
func TestHeartbeatsWithoutMessagesCountRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		e := newEnv(t, timing)
		d := e.connect(e.n.Gateway(), "alice", "phone", 1)
		d.halt() // its own beats stop: this test beats by hand
		before := testutil.ToFloat64(e.n.metrics.ClientRestarts)
		var last time.Time
		for _, seq := range []uint64{5, 6, 1, 2} {
			time.Sleep(timing.Heartbeat)
			d.conn.Heartbeat(seq, 0)
			last = time.Now()
		}
		synctest.Wait()
		if got := testutil.ToFloat64(e.n.metrics.ClientRestarts) - before; got != 1 {
			t.Fatalf("client restarts %v, want 1", got)
		}
		time.Sleep(timing.Stale - timing.Heartbeat)
		synctest.Wait()
		if c := d.sock.closeCode(); c != 0 {
			t.Fatalf("closed with %d %v after its last heartbeat, within stale", c, timing.Stale-timing.Heartbeat)
		}
		time.Sleep(timing.Heartbeat + 2*timing.Check)
		synctest.Wait()
		if c := d.sock.closeCode(); c != messages.CloseGoingAway {
			t.Fatalf("close code %d past stale, want %d", c, messages.CloseGoingAway)
		}
		// The departure is the last heartbeat, read from the atomic.
		time.Sleep(timing.Debounce + time.Second)
		synctest.Wait()
		st, err := e.n.Query(context.Background(), "alice")
		if err != nil || st.GetOnline() || st.GetLastSeenMs() != last.UnixMilli() {
			t.Fatalf("view %v (%v): want offline, last seen %d (the last heartbeat)", st, err, last.UnixMilli())
		}
	})
}

// A connection lives no longer than its credential: the gateway's
// deadlines tell it when its token expires, and it closes its socket with
// 4401 within a check of the expiry and not before, though it heartbeats
// on; the connections without an expiry, or with one past what Unix
// nanoseconds hold, stay.
func TestTokenExpiryClosesWithinACheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e := newEnv(t, timing)
		// Past a few stale periods and between two checks: the
		// connection's next stale deadline is then later than its expiry.
		expires := time.Now().Add(3*timing.Stale + timing.Check/3)
		d, err := e.open(e.n.Gateway(), OpenRequest{User: "alice", Device: "phone", Attempt: 1, Expires: expires})
		if err != nil {
			t.Fatal(err)
		}
		other := e.connect(e.n.Gateway(), "bob", "phone", 1)
		// A token minted never to expire (exp 9999999999, in 2286): past
		// what Unix nanoseconds hold, it must not wrap to the past.
		far, err := e.open(e.n.Gateway(), OpenRequest{User: "carol", Device: "phone", Attempt: 1, Expires: time.Unix(9999999999, 0)})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(expires) - time.Millisecond)
		synctest.Wait()
		if c := d.sock.closeCode(); c != 0 {
			t.Fatalf("closed with %d before its token expired", c)
		}
		time.Sleep(timing.Check + time.Millisecond)
		synctest.Wait()
		if c := d.sock.closeCode(); c != messages.CloseTokenExpired {
			t.Fatalf("close code %d a check after the token expired, want %d", c, messages.CloseTokenExpired)
		}
		if at := d.sock.closedAt(); at.Before(expires) || at.Sub(expires) > timing.Check {
			t.Fatalf("closed %v after the expiry, want within a check (%v)", at.Sub(expires), timing.Check)
		}
		if c := other.sock.closeCode(); c != 0 {
			t.Fatalf("the connection without an expiry was closed with %d", c)
		}
		if c := far.sock.closeCode(); c != 0 {
			t.Fatalf("the connection whose token expires in 2286 was closed with %d", c)
		}
	})
}
