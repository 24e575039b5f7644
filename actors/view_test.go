package actors

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
)

// E01 5.4: a non-contact and a blocked viewer get nothing, which is not
// "offline": the snapshot part says invisible and no event ever comes.
func TestNonContactAndBlockedGetNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		if err := e.policies.Put(context.Background(), "alice", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob", "mallory"}, Blocked: []string{"mallory"}}); err != nil {
			t.Fatal(err)
		}
		stranger, blocked, friend := e.subscribe("alice", "eve"), e.subscribe("alice", "mallory"), e.subscribe("alice", "bob")
		d := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(time.Minute)
		d.close()
		time.Sleep(time.Minute)
		synctest.Wait()
		for name, p := range map[string]*probe{"non-contact": stranger, "blocked": blocked} {
			parts := p.snapshot()
			if len(parts) != 1 || parts[0].GetVisible() || parts[0].GetPresence() != nil {
				t.Errorf("%s snapshot = %v, want one invisible part", name, parts)
			}
			if ev := p.all(); len(ev) != 0 {
				t.Errorf("%s got %d events, want none", name, len(ev))
			}
		}
		if got := e.statuses(friend); len(got) != 2 {
			t.Errorf("contact got %v, want online and offline", got)
		}
	})
}

// E01 5.4: exact granularity shows the minute of the last departure, never
// the second; coarse shows "recently" within 24 h and "long_ago" after (as
// an event to a coarse subscriber that stays); hidden shows "unknown".
func TestGranularities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		e.policy("alice", core.Exact, "bob")
		e.policy("carol", core.Coarse, "bob")
		e.policy("dave", core.Hidden, "bob")
		exact, coarse, hidden := e.subscribe("alice", "bob"), e.subscribe("carol", "bob"), e.subscribe("dave", "bob")
		var devs []*device
		for _, u := range []string{"alice", "carol", "dave"} {
			devs = append(devs, e.connect(e.n.Gateway(), u, "phone", 1))
		}
		time.Sleep(95 * time.Second) // depart at 1m35s: not a whole minute
		left := time.Now()
		for _, d := range devs {
			d.close()
		}
		time.Sleep(25 * time.Hour)
		synctest.Wait()

		ev := exact.all()
		if len(ev) != 2 || ev[1].p.GetStatus() != messages.Status_offline || ev[1].p.GetLastSeenMinute() != uint32(left.Unix()/60) {
			t.Fatalf("exact events = %v, want offline with last seen minute %d", ev, left.Unix()/60)
		}
		var got []string
		for _, s := range coarse.all() {
			got = append(got, s.p.GetStatus().String())
			if s.p.GetLastSeenMinute() != 0 {
				t.Fatalf("coarse event carries a last seen minute: %v", s.p)
			}
		}
		if want := []string{"online", "recently", "long_ago"}; !slices.Equal(got, want) {
			t.Fatalf("coarse events = %v, want %v", got, want)
		}
		parts := hidden.snapshot()
		if len(parts) != 1 || parts[0].GetPresence().GetStatus() != messages.Status_unknown {
			t.Fatalf("hidden snapshot = %v, want unknown", parts)
		}
		if ev := hidden.all(); len(ev) != 0 {
			t.Fatalf("hidden got events %v, want none", ev)
		}
	})
}

// Lease and view actors with nothing live passivate after Idle; later
// messages re-create them with what must not be forgotten: the attempt floor
// (a stale handshake is still refused) and the last-seen minute.
func TestPassivatedActorsComeBackCorrect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		e := newEnv(t, timing)
		e.policy("alice", core.Exact, "bob")
		d := e.connect(e.n.Gateway(), "alice", "phone", 5)
		time.Sleep(time.Minute)
		d.close()
		left := time.Now()
		time.Sleep(timing.Debounce + timing.Idle + time.Second)
		synctest.Wait()
		if c := e.n.Counts(); c["lease"] != 0 || c["view"] != 0 {
			t.Fatalf("counts after idle = %v, want no lease or view actor", c)
		}
		_, err := e.tryConnect(e.n.Gateway(), "alice", "phone", 5)
		if !errors.Is(err, ErrRefused) || !errors.Is(err, core.ErrStaleAttempt) {
			t.Fatalf("stale attempt after passivation: err = %v, want ErrRefused and ErrStaleAttempt", err)
		}
		p := e.subscribe("alice", "bob")
		synctest.Wait()
		parts := p.snapshot()
		if len(parts) != 1 || parts[0].GetPresence().GetStatus() != messages.Status_offline || parts[0].GetPresence().GetLastSeenMinute() != uint32(left.Unix()/60) {
			t.Fatalf("snapshot after passivation = %v, want offline last seen at minute %d", parts, left.Unix()/60)
		}
		e.connect(e.n.Gateway(), "alice", "phone", 6)
		synctest.Wait()
		if ev := p.all(); len(ev) != 1 || ev[0].p.GetStatus() != messages.Status_online || ev[0].p.GetVersion() <= parts[0].GetPresence().GetVersion() {
			t.Fatalf("events = %v, want one online newer than the snapshot", ev)
		}
	})
}

// A refused handshake leaves nothing behind: no live lease, no connection
// actor, no floor moved.
func TestRefusedHandshakeWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		e.connect(e.n.Gateway(), "alice", "phone", 3)
		for _, attempt := range []uint64{3, 2} {
			if _, err := e.tryConnect(e.n.Gateway(), "alice", "phone", attempt); !errors.Is(err, core.ErrStaleAttempt) {
				t.Fatalf("attempt %d: err = %v, want ErrStaleAttempt", attempt, err)
			}
		}
		synctest.Wait()
		if floor, _ := e.history.Floor(context.Background(), "alice", "phone"); floor != 3 {
			t.Fatalf("floor = %d, want 3", floor)
		}
		st, _ := e.n.Query(context.Background(), "alice")
		if len(st.Devices) != 1 || st.Devices[0].Epoch != 3 {
			t.Fatalf("devices = %v, want the epoch 3 connection only", st.Devices)
		}
		if c := e.n.Counts(); c["connection"] != 1 {
			t.Fatalf("connection actors = %d, want 1", c["connection"])
		}
	})
}

// Subscribing through a connection: the snapshot frame comes first with the
// visible targets only, then change events, each newer than the last.
func TestConnectionSubscribeSnapshotThenEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		e.policy("alice", core.Exact, "bob")
		bob := e.connect(e.n.Gateway(), "bob", "laptop", 1)
		bob.conn.Subscribe("s1", []string{"alice", "carol"}, messages.Tier_realtime) // carol has no policy
		synctest.Wait()
		alice := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(time.Minute)
		alice.conn.SetShow(messages.Show_dnd)
		time.Sleep(time.Minute)
		alice.close()
		time.Sleep(time.Minute)
		synctest.Wait()
		bob.sock.mu.Lock()
		frames := slices.Clone(bob.sock.frames)
		bob.sock.mu.Unlock()
		if len(frames) != 4 {
			t.Fatalf("frames = %v, want snapshot and 3 events", frames)
		}
		snap := frames[0].GetSnapshot()
		if snap.GetRequestId() != "s1" || len(snap.GetPresences()) != 1 || snap.GetPresences()[0].GetUser() != "alice" || snap.GetPresences()[0].GetStatus() != messages.Status_offline {
			t.Fatalf("snapshot = %v, want alice offline only", snap)
		}
		want := []string{"online available", "online dnd", "offline show_unspecified"}
		last := snap.GetPresences()[0].GetVersion()
		for i, f := range frames[1:] {
			p := f.GetPresence()
			if got := p.GetStatus().String() + " " + p.GetShow().String(); got != want[i] {
				t.Fatalf("event %d = %q, want %q", i, got, want[i])
			}
			if p.GetVersion() <= last {
				t.Fatalf("event %d version %d not newer than %d", i, p.GetVersion(), last)
			}
			last = p.GetVersion()
		}
	})
}

// Backpressure: a device that stops reading overflows its bounded outbox;
// the connection is closed with 4008 and its lease released, and no sender
// waited for it.
func TestOutboxOverflowClosesWith4008(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		e.policy("alice", core.Exact, "bob")
		bob := e.connect(e.n.Gateway(), "bob", "laptop", 1)
		bob.sock.mu.Lock()
		bob.sock.limit = 2
		bob.sock.mu.Unlock()
		bob.conn.Subscribe("s1", []string{"alice"}, messages.Tier_realtime)
		alice := e.connect(e.n.Gateway(), "alice", "phone", 1)
		for _, s := range []messages.Show{messages.Show_away, messages.Show_dnd, messages.Show_available} {
			alice.conn.SetShow(s)
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if c := bob.sock.closeCode(); c != messages.CloseOverflow {
			t.Fatalf("slow receiver closed with %d, want %d", c, messages.CloseOverflow)
		}
		st, _ := e.n.Query(context.Background(), "bob")
		if len(st.Devices) != 0 {
			t.Fatalf("bob's devices = %v, want none after the overflow", st.Devices)
		}
	})
}

// gatedHistory holds every floor write until release is closed, as a slow
// commit of the store's writer would.
type gatedHistory struct {
	*store.MemoryHistory
	release chan struct{}
}

func (h gatedHistory) RaiseFloor(ctx context.Context, user, device string, attempt uint64) error {
	<-h.release
	return h.MemoryHistory.RaiseFloor(ctx, user, device, attempt)
}

// A handshake is answered only once its attempt floor is durable: while
// the floor's write waits for its commit, Open has not returned (the socket
// layer answers 101 after it), and the floor is stored when it does. The
// store's batching must not answer a floor before its commit either
// (store.TestBatcherAnswersAfterItsCommit).
func TestHandshakeAnsweredOnlyOnceItsFloorIsDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := gatedHistory{store.NewMemoryHistory(), make(chan struct{})}
		n, err := Start(Deps{NodeID: "g1", Seed: 1, Timing: config.Seed(), Policies: store.NewMemoryPolicies(), History: h})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { n.Stop(); time.Sleep(2 * time.Second) }()
		opened := make(chan error, 1)
		go func() {
			_, err := n.Gateway().Open(context.Background(), OpenRequest{User: "alice", Device: "phone", Attempt: 7, ConnID: "c1", Socket: &fakeSocket{}})
			opened <- err
		}()
		synctest.Wait()
		select {
		case err := <-opened:
			close(h.release)
			t.Fatalf("handshake answered (%v) before its floor was written", err)
		default:
		}
		if floor, _ := h.Floor(context.Background(), "alice", "phone"); floor != 0 {
			t.Fatalf("floor %d before the write was released", floor)
		}
		close(h.release)
		if err := <-opened; err != nil {
			t.Fatal(err)
		}
		if floor, _ := h.Floor(context.Background(), "alice", "phone"); floor != 7 {
			t.Fatalf("floor %d once the handshake was answered, want 7", floor)
		}
	})
}

// loaderPolicies is a policy store that also reads a user's policy and last
// seen in one call (store.ViewLoader), counting each kind of read.
type loaderPolicies struct {
	*store.MemoryPolicies
	h          *store.MemoryHistory
	gets, both atomic.Int64
}

func (p *loaderPolicies) Get(ctx context.Context, user string) (store.PolicyDoc, bool, error) {
	p.gets.Add(1)
	return p.MemoryPolicies.Get(ctx, user)
}

func (p *loaderPolicies) LoadView(ctx context.Context, user string) (store.PolicyDoc, bool, time.Time, error) {
	p.both.Add(1)
	doc, ok, err := p.MemoryPolicies.Get(ctx, user)
	last, _ := p.h.LastSeen(ctx, user)
	return doc, ok, last, err
}

// countedHistory counts the last-seen reads.
type countedHistory struct {
	*store.MemoryHistory
	lastSeens atomic.Int64
}

func (h *countedHistory) LastSeen(ctx context.Context, user string) (time.Time, error) {
	h.lastSeens.Add(1)
	return h.MemoryHistory.LastSeen(ctx, user)
}

// A view's activation reads the user's policy and last seen in one round
// trip when the policy store can (one read per user that connects cold,
// not two), and gets both right.
func TestViewActivationReadsOnceWithAViewLoader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := &countedHistory{MemoryHistory: store.NewMemoryHistory()}
		p := &loaderPolicies{MemoryPolicies: store.NewMemoryPolicies(), h: h.MemoryHistory}
		seen := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		if err := h.SetLastSeen(ctx, "alice", seen); err != nil {
			t.Fatal(err)
		}
		n, err := Start(Deps{NodeID: "g1", Seed: 1, Timing: config.Seed(), Policies: p, History: h})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { n.Stop(); time.Sleep(2 * time.Second) }()
		st, err := n.Query(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if st.GetLastSeenMs() != seen.UnixMilli() {
			t.Fatalf("last seen %d, want %d from the store", st.GetLastSeenMs(), seen.UnixMilli())
		}
		if b, g, l := p.both.Load(), p.gets.Load(), h.lastSeens.Load(); b != 1 || g != 0 || l != 0 {
			t.Fatalf("activation read %d times through LoadView, %d policies, %d last seens: want 1, 0, 0", b, g, l)
		}
	})
}

// A view that may replace one on another member settles Timing.Settle
// after the latest membership change, not only after its activation: in a
// cascade of verdicts its devices re-register up to a propagation and a
// spread after the latest, and a view activated at the first published a
// device offline just before its re-registration came.
func TestUnsettledViewWaitsForTheLastChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		timing.FailureDetection, timing.Settle = 2700*time.Millisecond, 1550*time.Millisecond // cluster.Timings' (fast)
		e := newEnv(t, timing, seams{members: &fakeRoster{moved: true}})
		e.n.changedAt.Store(time.Now().UnixNano()) // a member declared dead
		e.policy("alice", core.Exact, "bob")
		p := e.subscribe("alice", "bob") // alice's view, re-created here
		time.Sleep(timing.Settle / 2)
		e.n.changedAt.Store(time.Now().UnixNano())    // another one
		time.Sleep(timing.Settle * 3 / 4)             // the activation's window is over
		e.connect(e.n.Gateway(), "alice", "phone", 1) // her device re-registers
		time.Sleep(2 * timing.Settle)
		synctest.Wait()
		e.expectOnlineOnce(p, "alice")
	})
}

// A later change that did not move a re-created view holds its settle
// too: it may have moved a lease of the user's devices, whose member was
// declared dead only then (a 2+2+1 split, sides declared dead seconds
// apart), and that device re-registers a propagation and a spread after
// it, past the settle of the view's own activation; a re-attached
// subscriber must not be told offline meanwhile.
func TestUnsettledViewWaitsForALeaseMovedLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		timing.FailureDetection, timing.Settle = 2700*time.Millisecond, 1550*time.Millisecond // cluster.Timings' (fast)
		roster := &fakeRoster{}
		e := newEnv(t, timing, seams{members: roster})
		e.n.changedAt.Store(time.Now().UnixNano()) // the member holding alice's view declared dead
		roster.movedAt.Store(time.Now().UnixNano())
		if err := e.policies.Put(context.Background(), "alice", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob"}}); err != nil {
			t.Fatal(err) // stored, not told: that would activate her view now
		}
		time.Sleep(300 * time.Millisecond)
		p := e.reattach("alice", "bob") // re-creates her view here
		time.Sleep(700 * time.Millisecond)
		e.n.changedAt.Store(time.Now().UnixNano())    // the one holding her lease: her view stays
		time.Sleep(900 * time.Millisecond)            // past the activation's settle
		e.connect(e.n.Gateway(), "alice", "phone", 1) // her device re-registers
		time.Sleep(2 * timing.Settle)
		synctest.Wait()
		e.expectOnlineOnce(p, "alice")
	})
}

// A side that serves on the split-brain lease declares the members cut
// off up to seconds apart, more than Settle: a view re-created at one
// verdict waits while a member is silent, since its device's lease may be
// there, and the connection's re-register reaches it only after that
// member's verdict moved it (the chaos harness, partition-2-2-1-lease: a
// false offline at the side serving alone). Then, with no member silent,
// Settle after the latest change: if no device came, offline.
func TestUnsettledViewWaitsForASilentMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		timing.FailureDetection, timing.Settle = 5100*time.Millisecond, 1550*time.Millisecond // cluster.Timings' (fast, 100 members)
		roster := &fakeRoster{}
		e := newEnv(t, timing, seams{members: roster})
		e.n.changedAt.Store(time.Now().UnixNano()) // the member holding their views declared dead
		roster.movedAt.Store(time.Now().UnixNano())
		roster.quiet.Store(true) // another is cut off too, its verdict to come
		for _, u := range []string{"alice", "carol"} {
			if err := e.policies.Put(context.Background(), u, store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob"}}); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		p, q := e.reattach("alice", "bob"), e.reattach("carol", "bob") // re-creates their views here
		time.Sleep(1800 * time.Millisecond)                            // past their settle
		roster.quiet.Store(false)
		e.n.changedAt.Store(time.Now().UnixNano())    // its verdict
		time.Sleep(700 * time.Millisecond)            // a propagation and a spread
		e.connect(e.n.Gateway(), "alice", "phone", 1) // her device re-registers
		time.Sleep(2 * timing.Settle)
		synctest.Wait()
		e.expectOnlineOnce(p, "alice")
		ev := q.all()
		if len(ev) != 1 || ev[0].p.GetStatus() != messages.Status_offline {
			t.Fatalf("carol: events %v, want offline once (no device came)", e.statuses(q))
		}
		if at, want := ev[0].at.Sub(start), 1800*time.Millisecond+timing.Settle; at < want {
			t.Fatalf("carol offline %v after the activation, want Settle after the verdict (%v)", at, want)
		}
	})
}

// expectOnlineOnce fails unless p was told user online once and nothing
// else: the user was connected all along.
func (e *env) expectOnlineOnce(p *probe, user string) {
	e.t.Helper()
	ev := p.all()
	if len(ev) != 1 || ev[0].p.GetStatus() != messages.Status_online {
		e.t.Fatalf("events %v, want %s online once: connected all along", e.statuses(p), user)
	}
}

// Changes that keep coming (a rolling deploy, a member crash-looping) do
// not keep a re-created view unsettled for ever: it settles a failure
// detection and settle after its activation at the latest, as the
// owner-crash bound counts, and reports its user offline if no device came.
func TestUnsettledViewSettlesWithinItsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		timing.FailureDetection, timing.Settle = 2700*time.Millisecond, 1550*time.Millisecond
		e := newEnv(t, timing, seams{members: &fakeRoster{moved: true}})
		e.n.changedAt.Store(time.Now().UnixNano())
		e.policy("alice", core.Exact, "bob")
		start := time.Now()
		p := e.subscribe("alice", "bob")
		for range 16 { // a change every half second for 8 s
			time.Sleep(500 * time.Millisecond)
			e.n.changedAt.Store(time.Now().UnixNano())
		}
		synctest.Wait()
		ev := p.all()
		if len(ev) != 1 || ev[0].p.GetStatus() != messages.Status_offline {
			t.Fatalf("events %v, want alice offline once", e.statuses(p))
		}
		if at, bound := ev[0].at.Sub(start), timing.FailureDetection+timing.Settle; at > bound {
			t.Fatalf("settled %v after its activation, bound %v", at, bound)
		}
	})
}

// downHistory fails every call while down is set, as a stopped store.
type downHistory struct {
	*store.MemoryHistory
	down *atomic.Bool
}

func (h downHistory) Floor(ctx context.Context, user, device string) (uint64, error) {
	if h.down.Load() {
		return 0, errors.New("connection refused")
	}
	return h.MemoryHistory.Floor(ctx, user, device)
}

func (h downHistory) RaiseFloor(ctx context.Context, user, device string, attempt uint64) error {
	if h.down.Load() {
		return errors.New("connection refused")
	}
	return h.MemoryHistory.RaiseFloor(ctx, user, device, attempt)
}

// TestStoreDownLeaseReadsItsFloorFirst: a lease actor started while the
// store was down could not read the device's floor; it refuses every
// handshake until it has, so that once the store is back an attempt below
// the stored floor is still refused as stale, not accepted over a floor
// it never saw.
func TestStoreDownLeaseReadsItsFloorFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := downHistory{store.NewMemoryHistory(), &atomic.Bool{}}
		if err := h.MemoryHistory.RaiseFloor(context.Background(), "alice", "phone", 10); err != nil {
			t.Fatal(err)
		}
		e := newEnvWith(t, Deps{Timing: config.Seed(), History: h})
		h.down.Store(true)
		if _, err := e.tryConnect(e.n.Gateway(), "alice", "phone", 11); err == nil || errors.Is(err, core.ErrStaleAttempt) {
			t.Fatalf("a handshake with the store down: %v, want refused for the store", err)
		}
		h.down.Store(false)
		if _, err := e.tryConnect(e.n.Gateway(), "alice", "phone", 5); !errors.Is(err, core.ErrStaleAttempt) {
			t.Fatalf("attempt 5 under the stored floor 10 once the store is back: %v, want ErrStaleAttempt", err)
		}
		e.connect(e.n.Gateway(), "alice", "phone", 12).close()
	})
}
