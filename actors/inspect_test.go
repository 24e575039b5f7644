package actors

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

func (e *env) inspect(kind, prefix, after string, limit uint32) *messages.ActorsPage {
	e.t.Helper()
	p, err := e.n.Inspect(context.Background(), "", &messages.ActorsQuery{Kind: kind, Prefix: prefix, After: after, Limit: limit})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func keys(p *messages.ActorsPage) []string {
	var out []string
	for _, a := range p.GetActors() {
		out = append(out, a.GetKey())
	}
	return out
}

// The inspector pages over a node's live actors in key order, by prefix,
// and each actor answers its own state: a lease's holder and expiry, a
// view's subscribers by node and pending offline, a connection's device
// and liveness; a stopped actor leaves the index.
func TestInspectorPagesActorsWithTheirState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timing := config.Seed()
		e := newEnv(t, timing)
		e.policy("alice", core.Exact, "bob")
		phone, laptop := e.connect(e.n.Gateway(), "alice", "phone", 1), e.connect(e.n.Gateway(), "alice", "laptop", 1)
		bob := e.connect(e.n.Gateway(), "bob", "phone", 1)
		e.connect(e.n.Gateway(), "alice2", "phone", 1)
		bob.conn.Subscribe("r1", []string{"alice"}, messages.Tier_realtime)
		time.Sleep(10 * time.Second)
		synctest.Wait()

		p1 := e.inspect("lease", "alice/", "", 1)
		if got := keys(p1); len(got) != 1 || got[0] != "alice/laptop" || p1.GetNext() == "" || p1.GetTotal() != 4 {
			t.Fatalf("first page %v next %q total %d, want [alice/laptop], a cursor, 4", got, p1.GetNext(), p1.GetTotal())
		}
		p2 := e.inspect("lease", "alice/", p1.GetNext(), 1)
		if got := keys(p2); len(got) != 1 || got[0] != "alice/phone" || p2.GetNext() != "" {
			t.Fatalf("second page %v next %q, want [alice/phone] and no more", got, p2.GetNext())
		}
		l := p2.GetActors()[0].GetLease()
		if l.GetHolder().GetConnId() != phone.conn.ID || l.GetHolder().GetEpoch() != 1 || l.GetExpiresInMs() <= 0 || l.GetExpiresInMs() > timing.TTL.Milliseconds() {
			t.Fatalf("alice/phone's lease %v: want held by %s, epoch 1, expiring within TTL", l, phone.conn.ID)
		}
		v := e.inspect("view", "alice", "", 1).GetActors()[0]
		if v.GetKey() != "alice" || v.GetView().GetStatus() != "online" || v.GetView().GetSubscribers()["g1"] != 1 || v.GetView().GetDevices() != 2 {
			t.Fatalf("alice's view %v: want online, 2 devices, 1 subscriber on g1", v)
		}
		c := e.inspect("connection", "bob", "", 0).GetActors()
		if len(c) != 1 || c[0].GetConnection().GetGateway() != "g1" || !c[0].GetConnection().GetActive() || c[0].GetConnection().GetSubscriptions() != 1 ||
			c[0].GetConnection().GetLastAliveAgoMs() > timing.Heartbeat.Milliseconds() {
			t.Fatalf("bob's connections %v: want one on g1, active, 1 subscription, alive within a heartbeat", c)
		}
		if g := e.inspect("gateway", "", "", 0).GetActors(); len(g) != 1 || g[0].GetKey() != "g1" || g[0].GetGateway().GetConnections() != 4 {
			t.Fatalf("gateways %v: want g1 with 4 connections", g)
		}

		phone.close()
		laptop.close()
		time.Sleep(time.Second)
		synctest.Wait()
		v = e.inspect("view", "alice", "", 1).GetActors()[0]
		if in := v.GetView().GetDebounceInMs(); in <= 0 || in > timing.Debounce.Milliseconds() {
			t.Fatalf("alice's view after both left: debounce in %d ms, want in (0, %v]", in, timing.Debounce)
		}
		if l := e.inspect("lease", "alice/phone", "", 1).GetActors()[0].GetLease(); l.GetHolder() != nil || l.GetEnded() != messages.EndReason_close {
			t.Fatalf("alice/phone's lease after the close %v: want no holder, ended by close", l)
		}
		if p := e.inspect("connection", "", "", 0); p.GetTotal() != 2 || fmt.Sprint(keys(p)) != "[alice2/phone bob/phone]" {
			t.Fatalf("connections after alice's left: %v (total %d), want alice2's and bob's", keys(p), p.GetTotal())
		}
		time.Sleep(timing.Debounce)
		synctest.Wait()
		if v := e.inspect("view", "alice", "", 1).GetActors()[0].GetView(); v.GetStatus() != "offline" || v.GetDebounceInMs() != 0 {
			t.Fatalf("alice's view after the debounce %v: want offline, nothing pending", v)
		}
	})
}

// A member that is not in the cluster is refused by name.
func TestInspectUnknownMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		_, err := e.n.Inspect(context.Background(), "nobody", &messages.ActorsQuery{Kind: "lease"})
		if err == nil || !errors.Is(err, ErrUnknownMember) {
			t.Fatalf("err = %v, want ErrUnknownMember", err)
		}
	})
}
