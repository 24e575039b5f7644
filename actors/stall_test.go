package actors

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
)

// After a stall (a tick much later than due) verdicts wait stallGrace; one
// due while the stall is not yet noticed waits too; a node stalling on and
// on gives them after stallMax; a fenced node gives none.
func TestStallClockHoldsVerdicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStallClock()
		defer s.stop()
		time.Sleep(time.Second)
		if hold, fenced := s.hold(); hold != 0 || fenced {
			t.Fatalf("running normally: hold %v fenced %v", hold, fenced)
		}
		// The process did not run for 3 s: the last tick is that old.
		s.last.Add(-int64(3 * time.Second))
		if hold, _ := s.hold(); hold != stallGrace {
			t.Fatalf("in an unnoticed stall: hold %v, want %v", hold, stallGrace)
		}
		time.Sleep(stallTick) // the ticker notices
		synctest.Wait()
		if hold, _ := s.hold(); hold <= 0 || hold > stallGrace {
			t.Fatalf("just after the stall: hold %v, want (0, %v]", hold, stallGrace)
		}
		time.Sleep(stallGrace)
		if hold, _ := s.hold(); hold != 0 {
			t.Fatalf("a grace after the stall: hold %v", hold)
		}
		// A node that keeps stalling gives its verdicts after stallMax.
		for range int(stallMax/stallTick) + 4 {
			s.last.Add(-int64(time.Second))
			time.Sleep(stallTick)
			synctest.Wait()
		}
		if hold, _ := s.hold(); hold != 0 {
			t.Fatalf("stalling for longer than %v: hold %v, want none", stallMax, hold)
		}
		s.fenced.Store(true)
		if _, fenced := s.hold(); !fenced {
			t.Fatal("fenced node gives verdicts")
		}
	})
}

// A verdict due while the node is in doubt (a death verdict not yet
// confirmed by enough members answering: it may be the one cut off) waits
// and is given once the doubt clears; a node that fences meanwhile gives
// none. Without a debounce too: the offline goes through its timer, and
// the gate.
func TestVerdictsWaitOutADoubt(t *testing.T) {
	zero := config.Fast()
	zero.Debounce = 0
	for _, tc := range []struct {
		name   string
		fence  bool
		timing config.Timing
	}{{"confirmed", false, config.Fast()}, {"fenced", true, config.Fast()}, {"confirmed, debounce 0", false, zero}, {"fenced, debounce 0", true, zero}} {
		fence := tc.fence
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				doubt := &fakeRoster{}
				e, p := watchedAlice(t, tc.timing, seams{members: doubt})
				d := e.connect(e.n.Gateway(), "alice", "phone", 1)
				time.Sleep(time.Second)
				doubt.setDoubt(time.Millisecond)
				d.close()
				e.expectStatuses(p, 5*time.Second, "0s online") // the debounce passed long ago
				if fence {
					e.n.Fence()
				}
				cleared := time.Now()
				doubt.setDoubt(0)
				time.Sleep(time.Second)
				synctest.Wait()
				ev := p.all()
				if fence {
					if len(ev) != 1 {
						t.Fatalf("fenced in doubt: events %v, want none after the online", e.statuses(p))
					}
					return
				}
				if len(ev) != 2 || ev[1].p.GetStatus() != messages.Status_offline {
					t.Fatalf("events %v, want online then offline", e.statuses(p))
				}
				if late := ev[1].at.Sub(cleared); late > 2*doubtHoldMin {
					t.Fatalf("offline %v after the doubt cleared, want within %v", late, 2*doubtHoldMin)
				}
			})
		})
	}
}
