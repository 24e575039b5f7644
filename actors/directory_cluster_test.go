package actors

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// clusterDir is a ClusterDirectory over the env's node (alone) whose owner
// of an identity is owners[id], this node's address if unlisted.
func (e *env) clusterDir(owners map[string]string) *ClusterDirectory {
	e.t.Helper()
	d, err := NewClusterDirectory(e.n.sys, e.n.dir.(*LocalDirectory), func(_ Kind, id string) string {
		if o, ok := owners[id]; ok {
			return o
		}
		return e.n.Address()
	}, e.n.goneAddr, e.n.log)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { e.n.sys.EventStream.Unsubscribe(d.sub) })
	return d
}

// A message from another member reaches the actor through the directory
// host with its original sender, so a request is answered by the view
// itself, and one sent without a sender is handled too; both count for
// passivation like local ones, and the view passivates once idle. A
// message for an unknown kind is dropped.
func TestDirectoryHostDeliversWithSender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e := newEnv(t, timing)
		d := e.clusterDir(nil)
		e.n.root.Send(d.host, &messages.DirectoryDeliver{Kind: "grain", Identity: "alice", Message: wrap(KindView, "alice", &messages.ViewQuery{}).GetMessage()})
		e.n.root.Send(d.host, wrap(KindView, "alice", &messages.PolicyChanged{User: "alice"})) // sent, not requested
		res, err := e.n.root.RequestFuture(d.host, wrap(KindView, "alice", &messages.ViewQuery{User: "alice"}), time.Second).Result()
		if st, ok := res.(*messages.ViewState); err != nil || !ok || st.GetUser() != "alice" {
			t.Fatalf("request through the host = %v, %v; want alice's ViewState", res, err)
		}
		if c := e.n.Counts(); c["view"] != 1 || c["lease"] != 0 {
			t.Fatalf("counts = %v, want alice's view alone", c)
		}
		if got := testutil.ToFloat64(e.n.metrics.Messages.WithLabelValues("view")); got != 2 {
			t.Fatalf("view messages handled = %v, want 2", got)
		}
		time.Sleep(timing.Idle + time.Second)
		synctest.Wait()
		if c, p := e.n.Counts(), testutil.ToFloat64(e.n.metrics.Passivations.WithLabelValues("view")); c["view"] != 0 || p != 1 {
			t.Fatalf("after idle: counts %v, passivations %v; want the view passivated once", c, p)
		}
	})
}

// Sending to another member's identity never waits for it: the message
// goes to the owner's directory host at once (here no member is there: a
// dead letter), and a request fails instead of hanging.
func TestClusterDirectorySendsWithoutAsking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Fast())
		d := e.clusterDir(map[string]string{"bob": "127.0.0.1:1"})
		start := time.Now()
		d.Send(KindView, "bob", &messages.PolicyChanged{User: "bob"})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := d.Request(ctx, KindView, "bob", &messages.ViewQuery{User: "bob"}); err == nil {
			t.Fatal("request to an unreachable owner succeeded")
		}
		synctest.Wait()
		if waited := time.Since(start); waited > time.Second {
			t.Fatalf("send and request took %v, want at most the request's timeout", waited)
		}
		if got := testutil.ToFloat64(e.n.metrics.DeadLetters.WithLabelValues("*messages.DirectoryDeliver")); got < 1 {
			t.Fatalf("dead letters of DirectoryDeliver = %v, want the send to the unreachable host", got)
		}
		if c := e.n.Counts(); c["view"] != 0 {
			t.Fatalf("counts = %v, want no view here for bob", c)
		}
	})
}

// When the topology changes, the host stops the actors whose identity
// moved away, after what was already sent to them; a later message
// activates the identity anew. Those that stay are untouched.
func TestDirectoryHostStopsMovedActors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		owners := map[string]string{}
		d := e.clusterDir(owners)
		for _, u := range []string{"alice", "bob"} {
			d.Send(KindView, u, &messages.PolicyChanged{User: u})
		}
		synctest.Wait()
		owners["bob"] = "127.0.0.1:1"                                       // bob moved to another member
		d.local.Send(KindView, "bob", &messages.PolicyChanged{User: "bob"}) // queued before the sweep
		e.n.root.Send(d.host, sweepMoved{})
		synctest.Wait()
		if c := e.n.Counts(); c["view"] != 1 {
			t.Fatalf("counts after the sweep = %v, want alice's view alone", c)
		}
		if got := testutil.ToFloat64(e.n.metrics.Messages.WithLabelValues("view")); got != 3 {
			t.Fatalf("view messages handled = %v, want 3 (bob's queued one too)", got)
		}
		if p := testutil.ToFloat64(e.n.metrics.Passivations.WithLabelValues("view")); p != 0 {
			t.Fatalf("passivations = %v, want none (a move is not a passivation)", p)
		}
		d.local.Send(KindView, "bob", &messages.PolicyChanged{User: "bob"})
		synctest.Wait()
		if c := e.n.Counts(); c["view"] != 2 {
			t.Fatalf("counts = %v, want bob activated again", c)
		}
	})
}

// refusing is a Directory that refuses the first passivation of each kind,
// as when a message is on its way to the actor.
type refusing struct {
	Directory
	mu      sync.Mutex
	refused map[Kind]bool
}

func (r *refusing) Passivate(kind Kind, id string, self *actor.PID, received uint64) bool {
	r.mu.Lock()
	first := !r.refused[kind]
	r.refused[kind] = true
	r.mu.Unlock()
	return !first && r.Directory.Passivate(kind, id, self, received)
}

// An idle lease or view whose passivation is refused for a message on its
// way arms its idle timer again and stops later, even if that message
// (a refused release, a query) would not arm it: it does not stay for good.
func TestRefusedPassivationTriesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		e := newEnv(t, timing)
		e.n.dir = &refusing{Directory: e.n.dir, refused: map[Kind]bool{}}
		e.n.dir.Send(KindView, "alice", &messages.PolicyChanged{User: "alice"})
		e.n.dir.Send(KindLease, "alice/phone", &messages.LeaseRelease{User: "alice", Device: "phone", ConnId: "c1", Epoch: 1})
		time.Sleep(timing.Idle + time.Second)
		synctest.Wait()
		if c := e.n.Counts(); c["lease"] != 1 || c["view"] != 1 {
			t.Fatalf("counts after the refused passivations = %v, want the lease and the view still there", c)
		}
		time.Sleep(timing.Idle)
		synctest.Wait()
		if c := e.n.Counts(); c["lease"] != 0 || c["view"] != 0 {
			t.Fatalf("counts one idle later = %v, want both passivated", c)
		}
	})
}

// placed is a ClusterDirectory over the env's node (alone), made the
// node's own directory, whose owner of an identity can change while
// actors run: elsewhere[id] names another member.
type placed struct {
	*ClusterDirectory
	mu        sync.Mutex
	elsewhere map[string]string
}

func (e *env) placedDir() *placed {
	e.t.Helper()
	p := &placed{elsewhere: map[string]string{}}
	d, err := NewClusterDirectory(e.n.sys, e.n.dir.(*LocalDirectory), func(_ Kind, id string) string {
		p.mu.Lock()
		defer p.mu.Unlock()
		if o, ok := p.elsewhere[id]; ok {
			return o
		}
		return e.n.Address()
	}, e.n.goneAddr, e.n.log)
	if err != nil {
		e.t.Fatal(err)
	}
	p.ClusterDirectory = d
	e.n.dir = d
	return p
}

func (p *placed) move(id, to string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if to == "" {
		delete(p.elsewhere, id)
		return
	}
	p.elsewhere[id] = to
}

// A lease whose expiry finds that its identity is no longer this node's
// (a stale route activated it here, or it moved before the host's sweep)
// stops, and its directory forgets it: the directory holds only live
// actors, and when the identity comes back to this node a request
// activates a new lease and is answered, rather than going to the
// stopped one and timing out.
func TestActorStoppedByTheOwnerGateLeavesTheDirectory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e := newEnv(t, timing)
		p := e.placedDir()
		id := leaseID("alice", "phone")
		acquire := func(conn string, epoch uint64) (any, error) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			return p.Request(ctx, KindLease, id, &messages.LeaseAcquire{User: "alice", Device: "phone", Handshake: true,
				Holder: &messages.Holder{Node: "g1", ConnId: conn, Epoch: epoch}})
		}
		if res, err := acquire("c1", 1); err != nil || !res.(*messages.LeaseAcquired).GetOk() {
			t.Fatalf("acquire = %v, %v", res, err)
		}
		p.move(id, "127.0.0.1:1") // no sweep: as for a stale route's lease
		time.Sleep(timing.TTL + time.Second)
		synctest.Wait()
		if c, l := e.n.Counts()["lease"], p.local.Count(KindLease); c != 0 || l != 0 {
			t.Fatalf("after the expiry on a non-owner: %d lease actors, %d in the directory; want none", c, l)
		}
		p.move(id, "")
		if res, err := acquire("c2", 2); err != nil || !res.(*messages.LeaseAcquired).GetOk() {
			t.Fatalf("acquire once the identity is back = %v, %v; want a new lease's answer", res, err)
		}
	})
}

// A request from another member that reaches a node whose directory has
// stopped (the node is leaving) fails at once with a dead letter, as a
// local request gets ErrStopped, instead of holding the remote caller
// until its deadline.
func TestStoppedDirectoryAnswersRemoteRequestsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Fast())
		d := e.clusterDir(nil)
		d.local.Stop()
		start := time.Now()
		_, err := e.n.root.RequestFuture(d.host, wrap(KindView, "alice", &messages.ViewQuery{User: "alice"}), 5*time.Second).Result()
		if !errors.Is(err, actor.ErrDeadLetter) || time.Since(start) > 0 {
			t.Fatalf("request to a stopped directory = %v after %v; want a dead letter at once", err, time.Since(start))
		}
		if c := e.n.Counts(); c["view"] != 0 {
			t.Fatalf("counts = %v, want nothing activated", c)
		}
	})
}

// panicsOnce is a PolicyStore whose second Get panics, as a bug in a
// handler would.
type panicsOnce struct {
	store.PolicyStore
	gets atomic.Int64
}

func (p *panicsOnce) Get(ctx context.Context, user string) (store.PolicyDoc, bool, error) {
	if p.gets.Add(1) == 2 {
		panic("policy store bug")
	}
	return p.PolicyStore.Get(ctx, user)
}

// A view that panics while handling a message is restarted by proto.actor
// as a new instance under the same PID: it is counted once, not twice, and
// it still passivates once idle (the message it failed on counted as
// handled), instead of being refused for good.
func TestRestartedActorStillPassivates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		e := newEnv(t, timing)
		e.n.deps.Policies = &panicsOnce{PolicyStore: e.policies}
		e.n.PolicyChanged("boom") // Started reads the policy, PolicyChanged panics
		synctest.Wait()
		if c := e.n.Counts(); c["view"] != 1 {
			t.Fatalf("counts after the restart = %v, want one view", c)
		}
		time.Sleep(3 * timing.Idle)
		synctest.Wait()
		if c, p := e.n.Counts(), testutil.ToFloat64(e.n.metrics.Passivations.WithLabelValues("view")); c["view"] != 0 || p != 1 {
			t.Fatalf("after three idles: counts %v, passivations %v; want the view passivated", c, p)
		}
	})
}

// A directory message from a member this node declared dead or left is
// dropped at the host, as the fan-out drops such a member's view events
// (TestViewEventsFromADeadMemberAreDropped). Issue 13's false offline: a
// partitioned member's lease of a device connected to the majority
// expired there (the renewals could not reach it), and its DeviceDown,
// held by the partition, reached the device's view on the majority as the
// fenced member closed its sockets (or after the heal): the view dropped
// the device and published it offline. The same messages from a member
// alive are delivered.
func TestDirectoryMessagesFromADeadMemberAreDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Fast()
		e, p := watchedAlice(t, timing, seams{members: &fakeRoster{gone: map[string]bool{"dead:1": true}}})
		d := e.clusterDir(nil)
		alice := e.connect(e.n.Gateway(), "alice", "phone", 1)
		synctest.Wait()
		from := func(addr string, kind Kind, id string, msg any) *messages.DirectoryDeliver {
			m := wrap(kind, id, msg)
			m.From = addr
			return m
		}
		down := &messages.DeviceDown{User: "alice", Device: "phone", Epoch: 1, Reason: messages.EndReason_lease_expired, LastAliveMs: time.Now().UnixMilli()}
		release := &messages.LeaseRelease{User: "alice", Device: "phone", ConnId: alice.conn.ID, Epoch: 1, Reason: messages.EndReason_close, LastAliveMs: time.Now().UnixMilli()}
		e.n.root.Send(d.host, from("dead:1", KindView, "alice", down))
		e.n.root.Send(d.host, from("dead:1", KindLease, leaseID("alice", "phone"), release))
		time.Sleep(10 * timing.Debounce)
		synctest.Wait()
		if got := statusesOf(p); !slices.Equal(got, []string{"online"}) {
			t.Fatalf("after a dead member's down and release: events %v, want alice online alone", got)
		}
		if c := e.n.Counts(); c["lease"] != 1 || c["view"] != 1 {
			t.Fatalf("counts %v, want alice's lease and view", c)
		}
		e.n.root.Send(d.host, from("alive:1", KindView, "alice", down))
		time.Sleep(10 * timing.Debounce)
		synctest.Wait()
		if got := statusesOf(p); !slices.Equal(got, []string{"online", "offline"}) {
			t.Fatalf("after an alive member's down: events %v, want online then offline", got)
		}
		alice.halt()
	})
}

// statusesOf lists the statuses of p's events.
func statusesOf(p *probe) []string {
	var out []string
	for _, s := range p.all() {
		out = append(out, s.p.GetStatus().String())
	}
	return out
}
