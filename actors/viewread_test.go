package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
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
// ViewQuery, once the view has read the store (the first lookup after its
// devices' connects asks it); one of a user nobody has seen still asks
// (and stops) a view.
func TestLookupReadsTheViewsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Fast())
		phone := e.connect(e.n.Gateway(), "alice", "phone", 1)
		laptop := e.connect(e.n.Gateway(), "alice", "laptop", 1)
		time.Sleep(time.Second)
		synctest.Wait()
		reads := testutil.ToFloat64(e.n.metrics.ViewReads)
		if _, err := e.n.Query(context.Background(), "alice"); err != nil {
			t.Fatal(err)
		}
		if n := testutil.ToFloat64(e.n.metrics.ViewReads) - reads; n != 0 {
			t.Fatalf("view reads = %v at the first lookup of a view not loaded, want 0 (it asks the view)", n)
		}
		got, err := e.n.Query(context.Background(), "alice")
		if err != nil {
			t.Fatal(err)
		}
		if n := testutil.ToFloat64(e.n.metrics.ViewReads) - reads; n != 1 {
			t.Fatalf("view reads = %v after a lookup of an online user, want 1", n)
		}
		res, err := e.n.dir.Request(context.Background(), KindView, "alice", &messages.ViewQuery{User: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if want := res.(*messages.ViewState); !proto.Equal(got, want) || len(got.GetDevices()) != 2 || !got.GetOnline() {
			t.Fatalf("read %v, the view answers %v (want both devices online)", got, want)
		}
		views := e.n.dir.Count(KindView)
		if _, err := e.n.Query(context.Background(), "nobody"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := testutil.ToFloat64(e.n.metrics.ViewReads) - reads; n != 1 || e.n.dir.Count(KindView) != views {
			t.Fatalf("lookup of an unseen user: view reads %v (want 1: it asks the view), views %d (want %d: it stopped)", n, e.n.dir.Count(KindView), views)
		}
		phone.close()
		laptop.close()
	})
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
