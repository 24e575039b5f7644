package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
)

// raisePanicsOnce is a history store whose first floor write panics.
type raisePanicsOnce struct {
	store.HistoryStore
	raises atomic.Int64
}

func (h *raisePanicsOnce) RaiseFloor(ctx context.Context, user, device string, floor uint64) error {
	if h.raises.Add(1) == 1 {
		panic("history store bug")
	}
	return h.HistoryStore.RaiseFloor(ctx, user, device, floor)
}

// A lease actor restarted after a panic is made by its kind's shared
// Props, blank: it takes its identity again from the births, left there
// by the instance it replaces. It goes on serving its device (the user's
// view hears of it) and passivates once idle.
func TestRestartedLeaseKeepsItsIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e := newEnvWith(t, Deps{Timing: timing, History: &raisePanicsOnce{HistoryStore: store.NewMemoryHistory()}})
		e.policy("alice", core.Exact, "bob")
		p := e.subscribe("alice", "bob")
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := e.n.Gateway().Open(ctx, OpenRequest{User: "alice", Device: "phone", Attempt: 1, ConnID: "c1", Socket: &fakeSocket{}}); err == nil {
			t.Fatal("the handshake whose floor write panicked was answered")
		}
		synctest.Wait()
		d := e.connect(e.n.Gateway(), "alice", "phone", 2)
		synctest.Wait()
		if c := e.n.Counts(); c["lease"] != 1 {
			t.Fatalf("counts %v, want alice's one lease", c)
		}
		d.close()
		ev := e.expectOfflineSecond(p, timing.Debounce+time.Second)
		if ev.p.GetUser() != "alice" {
			t.Fatalf("offline of %q, want alice", ev.p.GetUser())
		}
		time.Sleep(3 * timing.Idle)
		synctest.Wait()
		if c := e.n.Counts(); c["lease"] != 0 {
			t.Fatalf("counts %v after idle, want the restarted lease passivated", c)
		}
	})
}

// sendPanicsOnce is a socket whose first Send panics.
type sendPanicsOnce struct {
	fakeSocket
	sends atomic.Int64
}

func (s *sendPanicsOnce) Send(f *messages.Frame) bool {
	if s.sends.Add(1) == 1 {
		panic("socket bug")
	}
	return s.fakeSocket.Send(f)
}

// A connection actor restarted after a panic takes its handshake's
// request again from the births, and that it holds the lease: its close
// releases it, so the device goes offline after the debounce, not when
// the lease expires; and it goes on renewing it (online past two TTLs).
func TestRestartedConnectionKeepsItsRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e, p := watchedAlice(t, timing)
		sock := &sendPanicsOnce{}
		c, err := e.n.Gateway().Open(context.Background(), OpenRequest{User: "alice", Device: "phone", Attempt: 1, ConnID: "c1", Socket: sock})
		if err != nil {
			t.Fatal(err)
		}
		d := &device{e: e, user: "alice", name: "phone", conn: c, sock: &sock.fakeSocket, stop: make(chan struct{}), done: make(chan struct{})}
		go d.beat(core.Rand(7, c.ID))
		t.Cleanup(d.halt)
		c.Subscribe("r1", []string{"carol"}, messages.Tier_realtime) // its snapshot's frame panics
		synctest.Wait()
		if sock.sends.Load() == 0 {
			t.Fatal("the connection sent no frame: nothing panicked")
		}
		time.Sleep(2 * timing.TTL)
		synctest.Wait()
		if got := e.statuses(p); len(got) != 1 {
			t.Fatalf("events %v past two TTLs after the restart, want alice online alone", got)
		}
		closed := time.Now()
		d.close()
		ev := e.expectOfflineSecond(p, timing.TTL+timing.Debounce+time.Second)
		if got := ev.at.Sub(closed); got > timing.Debounce {
			t.Fatalf("offline %v after the close, want within the debounce %v (the release was lost: the lease expired)", got, timing.Debounce)
		}
		e.expectDowns("close", 1)
	})
}
