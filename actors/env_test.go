package actors

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
)

// fakeNode is the node's part of an environment, for an actor run alone:
// it counts nothing, passivates nothing, gives every verdict, and no
// identity ever moved.
type fakeNode struct{}

func (fakeNode) activated(Kind, string, *actor.PID)                 {}
func (fakeNode) deactivated(Kind, string, *actor.PID)               {}
func (fakeNode) handled(_ Kind, received *uint64)                   { *received++ }
func (fakeNode) passivate(actor.Context, Kind, string, uint64) bool { return false }
func (fakeNode) gate(actor.Context, gate) bool                      { return true }
func (fakeNode) mayHaveMoved(Kind, string) bool                     { return false }
func (fakeNode) lastChange() time.Time                              { return time.Time{} }
func (fakeNode) silent() bool                                       { return false }
func (fakeNode) earlier(*messages.Holder) bool                      { return false }
func (fakeNode) memberAlive(string) bool                            { return false }
func (fakeNode) dropStale(actor.Context, string) bool               { return false }
func (fakeNode) emit(*messages.ObsEvent)                            {}

// sentLog records what an actor sends by identity.
type sentLog struct {
	mu   sync.Mutex
	msgs []any
}

func (s *sentLog) Send(kind Kind, id string, msg any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, msg)
}

// A lease actor runs on its environment alone, no node: a handshake
// raises the attempt floor in the store it was given and tells the
// user's view through the directory it was given.
func TestLeaseOnAFakeEnvironment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.NewTextHandler(io.Discard, nil))
		}))
		timing, history, views := config.Seed(), store.NewMemoryHistory(), &sentLog{}
		env := &leaseEnv{identityEnv: identityEnv{timing: &timing, sched: newTimers(sys.Root), births: &births{}, metrics: NewMetrics(nil),
			log: slog.New(slog.NewTextHandler(io.Discard, nil)), life: fakeNode{}, guard: fakeNode{}, place: fakeNode{}, emit: fakeNode{}.emit},
			floors: history, dir: views, renewals: new(atomic.Uint64)}
		defer func() {
			sys.Shutdown()
			env.sched.stopAll()
			time.Sleep(2 * time.Second) // proto.actor's dead-letter throttle
		}()
		env.births.leave("lease-1", identity{id: "alice/phone"})
		pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &leaseActor{env: env} }), "lease-1")
		if err != nil {
			t.Fatal(err)
		}
		acq := &messages.LeaseAcquire{User: "alice", Device: "phone", Handshake: true, Holder: &messages.Holder{Node: "g1", ConnId: "c1", Epoch: 3}}
		res, err := sys.Root.RequestFuture(pid, acq, time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if a := res.(*messages.LeaseAcquired); !a.GetOk() || a.GetFloor() != 3 {
			t.Fatalf("acquired = %v, want ok at floor 3", a)
		}
		if floor, _ := history.Floor(context.Background(), "alice", "phone"); floor != 3 {
			t.Fatalf("stored floor = %d, want 3", floor)
		}
		synctest.Wait()
		views.mu.Lock()
		defer views.mu.Unlock()
		if len(views.msgs) != 1 {
			t.Fatalf("sent to the view: %v, want one DeviceUp", views.msgs)
		}
		if up, ok := views.msgs[0].(*messages.DeviceUp); !ok || up.GetUser() != "alice" || up.GetHolder().GetEpoch() != 3 {
			t.Fatalf("sent to the view: %v, want alice's phone up at epoch 3", views.msgs[0])
		}
	})
}
