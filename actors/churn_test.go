package actors

import (
	"context"
	"fmt"
	"runtime"
	"slices"
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
// stays flat, so a node holds nothing per user it ever met. The growth per
// user is the median of the slopes between every two readings from the
// fourth wave on (Theil-Sen: a reading a few hundred KiB off, as the
// collector leaves them, moves it little; two readings alone scatter it
// across the bound), at most 40 bytes per user: far above what a node
// that keeps nothing per user shows, far below what one map entry per
// user forgotten costs.
func TestChurnLeavesNothingPerUser(t *testing.T) {
	const waves, users, from, perUser = 12, 3000, 4, 40
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		timing.Idle = time.Second
		e := newEnvWith(t, Deps{Timing: timing, History: forgetful{}})
		g := e.n.Gateway()
		heap := func() float64 {
			time.Sleep(10 * time.Second) // past idle: every actor passivated
			synctest.Wait()
			runtime.GC()
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return float64(m.HeapAlloc)
		}
		var readings []float64 // after wave from-1, from, ..., waves-1
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
			if w >= from-1 {
				readings = append(readings, heap())
			}
		}
		if c := e.n.Counts(); c["lease"]+c["view"]+c["connection"] != 0 {
			t.Fatalf("actors left after every device left and idle passed: %v", c)
		}
		var slopes []float64 // bytes per user between two readings
		for i := range readings {
			for j := i + 1; j < len(readings); j++ {
				slopes = append(slopes, (readings[j]-readings[i])/float64((j-i)*users))
			}
		}
		slices.Sort(slopes)
		grew := slopes[len(slopes)/2]
		t.Logf("live heap %.0f KiB after wave %d, %.0f KiB after wave %d: %.1f B per user met (median slope)", readings[0]/1024, from, readings[len(readings)-1]/1024, waves, grew)
		if grew > perUser {
			t.Fatalf("the live heap grows %.1f B per user never seen before (at most %d; readings %.0f): the node keeps something per user", grew, perUser, readings)
		}
	})
}
