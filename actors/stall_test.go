package actors

import (
	"testing"
	"testing/synctest"
	"time"
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
