package actors

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
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
	}, e.n.log)
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
