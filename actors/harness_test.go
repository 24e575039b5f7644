package actors

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) } // ants' package-level pool

// env is one node in a synctest bubble with memory stores.
type env struct {
	t        *testing.T
	n        *Node
	policies *store.MemoryPolicies
	history  *store.MemoryHistory
	start    time.Time
	conns    int // connections opened, for unique conn ids
}

func newEnv(t *testing.T, timing config.Timing, s ...seams) *env {
	t.Helper()
	return newEnvWith(t, Deps{Timing: timing}, s...)
}

// seams are what a test puts into its node as it starts (at most one):
// a membership of its own, a directory in front of the node's, epoch
// fencing switched off.
type seams struct {
	members cluster.Roster
	// wrapDir puts a directory in front of the node's (one that hangs or
	// fails, as a dying member's does).
	wrapDir func(Directory) Directory
	// unfenced: the negative control (unfenced_test.go).
	unfenced bool
}

// startWith is Start with the seams put in.
func startWith(d Deps, s seams) (*Node, error) {
	n, err := newNode(d)
	if err != nil {
		return nil, err
	}
	n.members = s.members
	if err := n.open(); err != nil {
		return nil, err
	}
	if s.wrapDir != nil {
		n.useDirectory(s.wrapDir(n.dir))
	}
	g, err := n.StartGateway(d.NodeID)
	if err != nil {
		n.Stop()
		return nil, err
	}
	if s.unfenced {
		unfence(n, g)
	}
	return n, nil
}

// fakeRoster is the membership a test gives a node alone: the actor
// addresses it says are gone, the start of each member's incarnation
// (cluster.Meta.Up, unix ms), a doubt, and whether identities moved.
type fakeRoster struct {
	mu    sync.Mutex
	gone  map[string]bool
	up    map[string]int64
	doubt time.Duration
	moved bool
	// quiet: a member is silent (Silent)
	quiet atomic.Bool
	// movedAt (unix nanoseconds, 0: never) is a change that moved every
	// identity: Moved reports it while it is within the window asked.
	movedAt atomic.Int64
}

func (r *fakeRoster) Self() cluster.Member               { return cluster.Member{ID: "g1", State: cluster.Alive} }
func (r *fakeRoster) Members() []cluster.Member          { return nil }
func (r *fakeRoster) Owner(kind, identity string) string { return "" }
func (r *fakeRoster) Moved(_, _ string, since time.Time) bool {
	at := r.movedAt.Load()
	return r.moved || at != 0 && at >= since.UnixNano()
}

func (r *fakeRoster) Gone(actor string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone[actor]
}

func (r *fakeRoster) Doubt() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.doubt
}

func (r *fakeRoster) Silent() bool { return r.quiet.Load() }

func (r *fakeRoster) Meta(id string) (cluster.Meta, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	up, ok := r.up[id]
	return cluster.Meta{ID: id, Up: up}, ok
}

func (r *fakeRoster) setDoubt(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.doubt = d
}

func (r *fakeRoster) setUp(member string, ms int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.up[member] = ms
}

// newEnvWith is newEnv with more of the node's Deps (metrics, logger, a
// history store); the node id, seed and policies are the env's own.
func newEnvWith(t *testing.T, d Deps, s ...seams) *env {
	t.Helper()
	e := &env{t: t, policies: store.NewMemoryPolicies(), history: store.NewMemoryHistory(), start: time.Now()}
	d.NodeID, d.Seed = "g1", 1
	if d.Policies == nil { // a test may bring its own, over e.policies
		d.Policies = e.policies
	}
	if d.History == nil { // a test may bring its own
		d.History = e.history
	}
	n, err := startWith(d, append(s, seams{})[0])
	if err != nil {
		t.Fatal(err)
	}
	e.n = n
	t.Cleanup(func() {
		n.Stop()
		// proto.actor's dead-letter log throttle keeps a goroutine for one
		// throttle interval; let it end (virtual time: instant).
		time.Sleep(2 * time.Second)
	})
	return e
}

func (e *env) policy(user string, g core.Granularity, contacts ...string) {
	e.t.Helper()
	if err := e.policies.Put(context.Background(), user, store.PolicyDoc{Granularity: g, Contacts: contacts}); err != nil {
		e.t.Fatal(err)
	}
	e.n.PolicyChanged(user)
}

// fakeSocket records what a connection actor sends and how it closes.
type fakeSocket struct {
	mu     sync.Mutex
	frames []*messages.Frame
	code   messages.CloseCode
	at     time.Time // when it was closed
	limit  int       // 0: unbounded
	slow   int       // yields per Send: a slow write that blocks nobody (set before use)
}

func (s *fakeSocket) Send(f *messages.Frame) bool {
	for range s.slow {
		runtime.Gosched()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limit > 0 && len(s.frames) >= s.limit {
		return false
	}
	s.frames = append(s.frames, f)
	return true
}

func (s *fakeSocket) Close(code messages.CloseCode, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.code == 0 {
		s.code, s.at = code, time.Now()
	}
}

// sent is a copy of the frames sent so far.
func (s *fakeSocket) sent() []*messages.Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.frames)
}

func (s *fakeSocket) closedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at
}

func (s *fakeSocket) closeCode() messages.CloseCode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.code
}

// device is a simulated client: a connection and a heartbeat loop that
// jitters each beat down by up to 10%, until it departs.
type device struct {
	e    *env
	user string
	name string
	conn *Conn
	sock *fakeSocket
	stop chan struct{}
	done chan struct{}
	skip map[uint64]bool // heartbeat seqs to lose; fixed before the loop starts
}

// connect opens a device's connection; its heartbeats with the seqs in lose
// never arrive.
func (e *env) connect(g *Gateway, user, dev string, attempt uint64, lose ...uint64) *device {
	e.t.Helper()
	d, err := e.tryConnect(g, user, dev, attempt, lose...)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e *env) tryConnect(g *Gateway, user, dev string, attempt uint64, lose ...uint64) (*device, error) {
	return e.open(g, OpenRequest{User: user, Device: dev, Attempt: attempt}, lose...)
}

// open is tryConnect with the rest of the handshake's request (platform,
// activity, class); the conn id and socket are the env's.
func (e *env) open(g *Gateway, r OpenRequest, lose ...uint64) (*device, error) {
	sock := &fakeSocket{}
	e.conns++
	r.ConnID, r.Socket = fmt.Sprintf("%s-%s-%s-%d", g.Node(), r.User, r.Device, e.conns), sock
	conn, err := g.Open(context.Background(), r)
	if err != nil {
		return nil, err
	}
	d := &device{e: e, user: r.User, name: r.Device, conn: conn, sock: sock, stop: make(chan struct{}), done: make(chan struct{}), skip: map[uint64]bool{}}
	for _, seq := range lose {
		d.skip[seq] = true
	}
	go d.beat(core.Rand(7, conn.ID))
	e.t.Cleanup(d.halt)
	return d, nil
}

func (d *device) beat(r interface{ Float64() float64 }) {
	defer close(d.done)
	t := d.e.n.deps.Timing
	for seq := uint64(1); ; seq++ {
		select {
		case <-d.stop:
			return
		case <-time.After(time.Duration(float64(t.Heartbeat) * (1 - t.HeartbeatJitter*r.Float64()))):
		}
		if d.skip[seq] {
			continue
		}
		d.conn.Heartbeat(seq, 0)
	}
}

// halt stops the heartbeats: the device is gone without a word (half-open)
// unless close is called too.
func (d *device) halt() {
	select {
	case <-d.stop:
	default:
		close(d.stop)
	}
	<-d.done
}

// close departs gracefully.
func (d *device) close() {
	d.halt()
	d.conn.Closed()
}

// probe is a subscriber sink recording snapshot parts and events with the
// virtual time they arrived.
type probe struct {
	mu     sync.Mutex
	parts  []*messages.SnapshotPart
	events []seen
}

type seen struct {
	at time.Time
	p  *messages.Presence
}

func (p *probe) Receive(ctx actor.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch m := ctx.Message().(type) {
	case *messages.SnapshotPart:
		p.parts = append(p.parts, m)
	case *messages.PresenceEvent:
		p.events = append(p.events, seen{time.Now(), m.GetPresence()})
	}
}

func (p *probe) all() []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seen(nil), p.events...)
}

func (p *probe) snapshot() []*messages.SnapshotPart {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*messages.SnapshotPart(nil), p.parts...)
}

// subscribe spawns a probe for viewer watching target.
func (e *env) subscribe(target, viewer string) *probe {
	p := &probe{}
	pid := e.n.System().Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	e.t.Cleanup(func() { _ = e.n.System().Root.StopFuture(pid).Wait() })
	e.n.Subscribe(target, viewer, pid, "r1")
	return p
}

// reattach spawns a probe for viewer re-attaching to target's view, as a
// connection re-registering after a membership change does, having last
// seen target online.
func (e *env) reattach(target, viewer string) *probe {
	p := &probe{}
	pid := e.n.System().Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	e.t.Cleanup(func() { _ = e.n.System().Root.StopFuture(pid).Wait() })
	last := &messages.Presence{User: target, Status: messages.Status_online, Show: messages.Show_available, Version: 1}
	e.n.dir.Send(KindView, target, &messages.ViewSubscribe{Target: target, Viewer: viewer, Sink: refOf(pid), Reattach: true, Last: last})
	return p
}

// statuses lists the statuses of events with the virtual time since start.
func (e *env) statuses(p *probe) []string {
	var out []string
	for _, s := range p.all() {
		out = append(out, fmt.Sprintf("%v %s", s.at.Sub(e.start), s.p.GetStatus()))
	}
	return out
}

// watchedAlice is a node where alice lets bob see her and bob subscribes
// to her: the setup of most E01 scenarios.
func watchedAlice(t *testing.T, timing config.Timing, s ...seams) (*env, *probe) {
	t.Helper()
	e := newEnv(t, timing, s...)
	e.policy("alice", core.Exact, "bob")
	return e, e.subscribe("alice", "bob")
}

// expectStatuses lets wait pass in virtual time, lets every actor settle
// and fails unless p saw exactly want (virtual time since start, status).
func (e *env) expectStatuses(p *probe, wait time.Duration, want ...string) {
	e.t.Helper()
	time.Sleep(wait)
	synctest.Wait()
	if got := e.statuses(p); !slices.Equal(got, want) {
		e.t.Fatalf("events = %v, want %v", got, want)
	}
}

// expectOfflineSecond lets wait pass and returns the offline event that
// must follow the first online one, and nothing else.
func (e *env) expectOfflineSecond(p *probe, wait time.Duration) seen {
	e.t.Helper()
	time.Sleep(wait)
	synctest.Wait()
	ev := p.all()
	if len(ev) != 2 || ev[1].p.GetStatus() != messages.Status_offline {
		e.t.Fatalf("events = %v, want online then offline", e.statuses(p))
	}
	return ev[1]
}

// expectDowns fails unless want devices went down for reason.
func (e *env) expectDowns(reason string, want float64) {
	e.t.Helper()
	if n := testutil.ToFloat64(e.n.metrics.DeviceTransitions.WithLabelValues("down", reason)); n != want {
		e.t.Fatalf("%s downs = %v, want %v", reason, n, want)
	}
}
