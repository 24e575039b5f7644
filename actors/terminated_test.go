package actors

import (
	"io"
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/cluster"
)

// aliveAt is a node part whose membership has a member alive at addr.
type aliveAt struct {
	fakeNode
	addr string
}

func (p aliveAt) memberAlive(addr string) bool { return addr == p.addr }

// A view keeps a sink whose Terminated says only that proto.actor's
// connection to an alive member's address ended (an earlier incarnation's
// connection there giving up ends the new one's too); a sink that stopped,
// was not found, or whose member is not alive is dropped.
func TestViewDropsASinkOnlyIfItMayBeGone(t *testing.T) {
	const alive, dead = "10.0.0.2:7947", "10.0.0.3:7947"
	a := &viewActor{env: &viewEnv{identityEnv: identityEnv{place: aliveAt{addr: alive}}}}
	for _, c := range []struct {
		addr string
		why  actor.TerminatedReason
		keep bool
	}{
		{alive, actor.TerminatedReason_AddressTerminated, true},
		{dead, actor.TerminatedReason_AddressTerminated, false},
		{alive, actor.TerminatedReason_Stopped, false},
		{alive, actor.TerminatedReason_NotFound, false},
	} {
		m := &actor.Terminated{Who: actor.NewPID(c.addr, "gateway-n3/c1"), Why: c.why}
		if got := a.connectionOnly(m); got != c.keep {
			t.Errorf("sink at %s, %v: kept %v, want %v", c.addr, c.why, got, c.keep)
		}
	}
}

// memberAlive: another member's actor address while it is alive; not this
// node's own, not one declared dead or left, not one no member has.
func TestMemberAlive(t *testing.T) {
	r := &rosterOf{fakeRoster: fakeRoster{gone: map[string]bool{}, up: map[string]int64{}}, members: map[string]string{"n2": "10.0.0.2:7947", "n3": "10.0.0.3:7947"}}
	n := &Node{members: r}
	n.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }))
	t.Cleanup(n.sys.Shutdown)
	r.gone["10.0.0.3:7947"] = true
	for addr, want := range map[string]bool{"10.0.0.2:7947": true, "10.0.0.3:7947": false, "10.0.0.4:7947": false, n.sys.Address(): false} {
		if got := n.memberAlive(addr); got != want {
			t.Errorf("memberAlive(%s) = %v, want %v", addr, got, want)
		}
	}
}

// rosterOf is a fakeRoster with members alive at actor addresses.
type rosterOf struct {
	fakeRoster
	members map[string]string // id: actor address
}

func (r *rosterOf) Members() []cluster.Member {
	var out []cluster.Member
	for id := range r.members {
		out = append(out, cluster.Member{ID: id, State: cluster.Alive})
	}
	return out
}

func (r *rosterOf) Meta(id string) (cluster.Meta, bool) {
	a, ok := r.members[id]
	return cluster.Meta{ID: id, Actor: a}, ok
}
