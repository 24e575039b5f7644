package actors

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
)

// forgetful is a history store that keeps nothing (a database keeps its
// rows on disk, not in the node's heap): what the heap holds after a wave
// is the node's own.
type forgetful struct{}

func (forgetful) Floor(context.Context, string, string) (uint64, error)    { return 0, nil }
func (forgetful) RaiseFloor(context.Context, string, string, uint64) error { return nil }
func (forgetful) LastSeen(context.Context, string) (time.Time, error)      { return time.Time{}, nil }
func (forgetful) SetLastSeen(context.Context, string, time.Time) error     { return nil }

// Memory follows live state: waves of devices of users never seen before
// connect, leave and their actors passivate; once the node's maps and
// pools have reached the waves' peak (the first few waves), the live heap
// stays flat, so a node holds nothing per user it ever met. The bound is
// 40 bytes per user over the last eight waves (measured: under 15, the
// collector's noise; a map entry per user forgotten is 50 and more).
func TestChurnLeavesNothingPerUser(t *testing.T) {
	const waves, users, from, perUser = 12, 3000, 4, 40
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		timing.Idle = time.Second
		e := newEnvWith(t, Deps{Timing: timing, History: forgetful{}})
		g := e.n.Gateway()
		heap := func() uint64 {
			time.Sleep(10 * time.Second) // past idle: every actor passivated
			synctest.Wait()
			runtime.GC()
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		var mid uint64
		for w := range waves {
			conns := make([]*Conn, 0, users)
			for i := range users {
				user := fmt.Sprintf("w%d-%05d", w, i)
				c, err := g.Open(context.Background(), OpenRequest{User: user, Device: "d", Attempt: 1, ConnID: "c" + user, Socket: nopSocket{}})
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			for _, c := range conns {
				c.Closed()
			}
			if w == from-1 {
				mid = heap()
			}
		}
		end := heap()
		if c := e.n.Counts(); c["lease"]+c["view"]+c["connection"] != 0 {
			t.Fatalf("actors left after every device left and idle passed: %v", c)
		}
		grew, met := int64(end)-int64(mid), int64(users*(waves-from))
		t.Logf("live heap %d KiB after wave %d, %d KiB after wave %d: %d B per user met since", mid>>10, from, end>>10, waves, grew/met)
		if grew > perUser*met {
			t.Fatalf("the live heap grew %d KiB over %d users never seen before (%d B each, at most %d): the node keeps something per user", grew>>10, met, grew/met, perUser)
		}
	})
}
