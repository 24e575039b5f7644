package actors

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
)

// viewPID is the PID of user's active view on e's node.
func (e *env) viewPID(user string) *actor.PID {
	e.t.Helper()
	d := e.n.dir.(*LocalDirectory)
	d.mu.Lock()
	defer d.mu.Unlock()
	en, ok := d.entries[KindView][user]
	if !ok {
		e.t.Fatalf("no view of %s", user)
	}
	return en.pid
}

// A lookup of an online user reads the view's state without a message to
// it (presence_view_reads_total) and gets what the view itself answers a
// ViewQuery, the first lookup after her devices' connects included (it
// reads the store on its own goroutine and the view keeps what it read);
// one of a user nobody has seen still asks (and stops) a view.
func TestLookupReadsTheViewsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, l := heldEnv(t)
		seen := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		if err := l.h.SetLastSeen(context.Background(), "alice", seen); err != nil {
			t.Fatal(err)
		}
		phone := e.connect(e.n.Gateway(), "alice", "phone", 1)
		laptop := e.connect(e.n.Gateway(), "alice", "laptop", 1)
		time.Sleep(time.Second)
		synctest.Wait()
		if n := l.loads.Load(); n != 0 {
			t.Fatalf("the connects read the view %d times, want 0", n)
		}
		reads := testutil.ToFloat64(e.n.metrics.ViewReads)
		first, err := e.n.Query(context.Background(), "alice")
		if err != nil {
			t.Fatal(err)
		}
		if n := testutil.ToFloat64(e.n.metrics.ViewReads) - reads; n != 1 || l.loads.Load() != 1 {
			t.Fatalf("first lookup of a view not loaded: view reads %v (want 1), store reads %d (want 1)", n, l.loads.Load())
		}
		if !e.viewLoaded("alice") {
			t.Fatal("the view is not loaded after the lookup read the store for it")
		}
		got, err := e.n.Query(context.Background(), "alice")
		if err != nil {
			t.Fatal(err)
		}
		if n := testutil.ToFloat64(e.n.metrics.ViewReads) - reads; n != 2 || l.loads.Load() != 1 {
			t.Fatalf("second lookup: view reads %v (want 2), store reads %d (want still 1)", n, l.loads.Load())
		}
		res, err := e.n.dir.Request(context.Background(), KindView, "alice", &messages.ViewQuery{User: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		want := res.(*messages.ViewState)
		if !proto.Equal(first, want) || !proto.Equal(got, want) || len(got.GetDevices()) != 2 || !got.GetOnline() || got.GetLastSeenMs() != seen.UnixMilli() {
			t.Fatalf("read %v then %v, the view answers %v (want both devices online, last seen %d)", first, got, want, seen.UnixMilli())
		}
		views := e.n.dir.Count(KindView)
		if _, err := e.n.Query(context.Background(), "nobody"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := testutil.ToFloat64(e.n.metrics.ViewReads) - reads; n != 2 || e.n.dir.Count(KindView) != views {
			t.Fatalf("lookup of an unseen user: view reads %v (want 2: it asks the view), views %d (want %d: it stopped)", n, e.n.dir.Count(KindView), views)
		}
		phone.close()
		laptop.close()
	})
}

// A lookup reading the store for a view not loaded, while the user's
// policy is written and its PolicyChanged sent, hands over nothing: what it
// read may be the old policy, and the view (which ignored the change, having
// none loaded) would keep it. It asks the view, which reads the new one.
// Without the check of what was sent meanwhile, bob, a contact in the new
// policy only, sees nothing.
func TestLookupLoadRacingAPolicyChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, l := heldEnv(t)
		phone := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(time.Second)
		synctest.Wait()
		release := l.holdNext()
		done := make(chan *messages.ViewState, 1)
		go func() {
			st, err := e.n.Query(context.Background(), "alice")
			if err != nil {
				t.Error(err)
			}
			done <- st
		}()
		synctest.Wait() // the lookup read the old policy (none) and is held
		if err := l.Put(context.Background(), "alice", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob"}}); err != nil {
			t.Fatal(err)
		}
		e.n.PolicyChanged("alice")
		synctest.Wait() // the view handled it: not loaded, it read nothing
		close(release)
		st := <-done
		if !st.GetOnline() {
			t.Fatalf("lookup: %v, want alice online", st)
		}
		e.viewReadItself(l, "the hand-over refused", "the lookup's, the view's", "a contact in the new policy")
		phone.close()
	})
}

// A lookup whose read of the store fails hands nothing over and asks the
// view, which reads the store itself: the answer is the view's, and the
// policy the view keeps is the one it read.
func TestLookupLoadFailingAsksTheView(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, l := heldEnv(t)
		if err := l.Put(context.Background(), "alice", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob"}}); err != nil {
			t.Fatal(err)
		}
		phone := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(time.Second)
		synctest.Wait()
		l.failNext(errors.New("store unreachable"))
		st, err := e.n.Query(context.Background(), "alice")
		if err != nil {
			t.Fatal(err)
		}
		if !st.GetOnline() || len(st.GetDevices()) != 1 {
			t.Fatalf("lookup: %v, want alice online with her phone", st)
		}
		e.viewReadItself(l, "nothing handed over", "the lookup's failed, the view's", "a contact, by the view's own read")
		phone.close()
	})
}

// viewReadItself checks that no lookup read alice's view (why), that the
// store was read twice (reads: by whom), and that bob, a contact in what
// the view read (contact), sees her.
func (e *env) viewReadItself(l *heldLoader, why, reads, contact string) {
	e.t.Helper()
	if n := testutil.ToFloat64(e.n.metrics.ViewReads); n != 0 || l.loads.Load() != 2 {
		e.t.Fatalf("view reads %v (want 0: %s), store reads %d (want 2: %s)", n, why, l.loads.Load(), reads)
	}
	bob := e.subscribe("alice", "bob")
	time.Sleep(time.Second)
	synctest.Wait()
	if got := bob.snapshot(); len(got) != 1 || !got[0].GetVisible() {
		e.t.Fatalf("bob, %s: snapshot %v, want alice visible", contact, got)
	}
}

// heldEnv is an env whose policy store is a heldLoader (also its history).
func heldEnv(t *testing.T) (*env, *heldLoader) {
	t.Helper()
	l := &heldLoader{MemoryPolicies: store.NewMemoryPolicies(), h: store.NewMemoryHistory()}
	return newEnvWith(t, Deps{Timing: config.Fast(), Policies: l, History: l.h}), l
}

// heldLoader is a store.ViewLoader whose next LoadView can be held after
// it read (holdNext) or failed (failNext), to race a lookup's read.
type heldLoader struct {
	*store.MemoryPolicies
	h     *store.MemoryHistory
	loads atomic.Int64

	mu      sync.Mutex
	release chan struct{}
	fail    error
}

func (l *heldLoader) holdNext() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.release = make(chan struct{})
	return l.release
}

func (l *heldLoader) failNext(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail = err
}

func (l *heldLoader) LoadView(ctx context.Context, user string) (store.PolicyDoc, bool, time.Time, error) {
	l.loads.Add(1)
	doc, ok, err := l.Get(ctx, user)
	last, _ := l.h.LastSeen(ctx, user)
	l.mu.Lock()
	release, fail := l.release, l.fail
	l.release, l.fail = nil, nil
	l.mu.Unlock()
	if release != nil {
		<-release
	}
	if fail != nil {
		return store.PolicyDoc{}, false, time.Time{}, fail
	}
	return doc, ok, last, err
}

// viewLoaded reports whether user's active view has read the store.
func (e *env) viewLoaded(user string) bool {
	d := e.n.dir.(*LocalDirectory)
	d.mu.Lock()
	en := d.entries[KindView][user]
	d.mu.Unlock()
	en.view.mu.Lock()
	defer en.view.mu.Unlock()
	return !en.view.v.Unloaded
}

// A lookup racing a change sent to the view before it sees the change, as
// through the mailbox: the view's mailbox is held with the change queued,
// so the view's state is old but its lock is free; the lookup must not read
// it (the view has not handled every message sent to it) and waits for
// the view's answer.
func TestLookupRacingAChangeSeesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Fast())
		phone := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(time.Second)
		synctest.Wait()
		pid := e.viewPID("alice")
		proc, _ := e.n.sys.ProcessRegistry.Get(pid)
		proc.SendSystemMessage(pid, &actor.SuspendMailbox{})
		synctest.Wait()
		e.n.dir.Send(KindView, "alice", &messages.DeviceShow{User: "alice", Device: "phone", Show: messages.Show_away})
		done := make(chan *messages.ViewState, 1)
		go func() {
			st, err := e.n.Query(context.Background(), "alice")
			if err != nil {
				t.Error(err)
			}
			done <- st
		}()
		synctest.Wait()
		proc.SendSystemMessage(pid, &actor.ResumeMailbox{})
		st := <-done
		if st.GetShow() != messages.Show_away {
			t.Fatalf("lookup after a show change sent to the view: show %v, want away", st.GetShow())
		}
		if n := testutil.ToFloat64(e.n.metrics.ViewReads); n != 0 {
			t.Fatalf("view reads = %v, want 0: the view had a message to handle", n)
		}
		phone.close()
	})
}
