package actors

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/store"
)

// takingHistory is a memory history that takes a floor in one trip, as
// the SQL stores do (store.FloorTaker), counting reads and takes; with a
// gate, a take waits for it as a commit would.
type takingHistory struct {
	*store.MemoryHistory
	reads, takes atomic.Int32
	gate         chan struct{} // nil: none
}

func (h *takingHistory) Floor(ctx context.Context, user, device string) (uint64, error) {
	h.reads.Add(1)
	return h.MemoryHistory.Floor(ctx, user, device)
}

func (h *takingHistory) TakeFloor(ctx context.Context, user, device string, attempt uint64) (store.Taken, error) {
	h.takes.Add(1)
	if h.gate != nil {
		<-h.gate
	}
	return store.TakeFloor(ctx, h.MemoryHistory, user, device, attempt)
}

// A cold handshake's lease takes its floor in one trip to the store, no
// read before it: above the stored floor it is accepted, at or below it
// refused as stale with the stored floor left as it was; a warm lease
// judges from the floor it holds.
func TestColdHandshakeTakesItsFloorInOneTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := &takingHistory{MemoryHistory: store.NewMemoryHistory()}
		for _, u := range []string{"alice", "carol"} {
			if err := h.MemoryHistory.RaiseFloor(ctx, u, "phone", 10); err != nil {
				t.Fatal(err)
			}
		}
		e := newEnvWith(t, Deps{Timing: config.Seed(), History: h})
		e.connect(e.n.Gateway(), "alice", "phone", 11)
		if r, k := h.reads.Load(), h.takes.Load(); r != 0 || k != 1 {
			t.Fatalf("a cold connect read the floor %d times and took it %d, want 0 and 1", r, k)
		}
		if _, err := e.tryConnect(e.n.Gateway(), "carol", "phone", 10); !errors.Is(err, core.ErrStaleAttempt) {
			t.Fatalf("a cold attempt at the stored floor: %v, want ErrStaleAttempt", err)
		}
		if f, _ := h.MemoryHistory.Floor(ctx, "carol", "phone"); f != 10 {
			t.Fatalf("a refused take left floor %d, want 10", f)
		}
		if _, err := e.tryConnect(e.n.Gateway(), "carol", "phone", 3); !errors.Is(err, core.ErrStaleAttempt) {
			t.Fatalf("carol's warm lease took attempt 3 under floor 10: %v", err)
		}
		if r, k := h.reads.Load(), h.takes.Load(); r != 0 || k != 2 {
			t.Fatalf("reads %d, takes %d, want 0 and 2 (the warm lease judged alone)", r, k)
		}
		e.connect(e.n.Gateway(), "carol", "phone", 12).close()
	})
}

// A cold handshake that takes its floor is answered only once the take is
// durable, and a take that fails refuses it for the store, not as stale.
func TestTakenFloorDurableBeforeTheAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &takingHistory{MemoryHistory: store.NewMemoryHistory(), gate: make(chan struct{})}
		e := newEnvWith(t, Deps{Timing: config.Seed(), History: h})
		opened := make(chan error, 1)
		go func() {
			_, err := e.tryConnect(e.n.Gateway(), "alice", "phone", 7)
			opened <- err
		}()
		synctest.Wait()
		select {
		case err := <-opened:
			t.Fatalf("handshake answered (%v) before its floor was taken", err)
		default:
		}
		close(h.gate)
		if err := <-opened; err != nil {
			t.Fatal(err)
		}
		if f, _ := h.MemoryHistory.Floor(context.Background(), "alice", "phone"); f != 7 {
			t.Fatalf("floor %d once answered, want 7", f)
		}
		time.Sleep(time.Second)
	})
}

// failingTaker's takes fail as a store that is down.
type failingTaker struct{ *store.MemoryHistory }

func (failingTaker) TakeFloor(context.Context, string, string, uint64) (store.Taken, error) {
	return store.Taken{}, errors.New("connection refused")
}

func TestFailedTakeRefusesForTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := failingTaker{store.NewMemoryHistory()}
		e := newEnvWith(t, Deps{Timing: config.Seed(), History: h})
		_, err := e.tryConnect(e.n.Gateway(), "alice", "phone", 7)
		if err == nil || errors.Is(err, core.ErrStaleAttempt) {
			t.Fatalf("a handshake whose take failed: %v, want refused for the store", err)
		}
		if f, _ := h.Floor(context.Background(), "alice", "phone"); f != 0 {
			t.Fatalf("floor %d written by a failed take", f)
		}
	})
}
