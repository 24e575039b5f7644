package cluster

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
)

// Provider is a proto.actor ClusterProvider over Gossip: every membership
// change hands proto.actor the full list of alive members, each with its
// actor system id, remote address and kinds from the gossip metadata.
//
// proto.actor blocks a member that left the topology for good, so a node
// that was declared dead must restart its actor system (new id) to come
// back; presenced does that by restarting.
type Provider struct {
	cfg GossipConfig

	mu   sync.Mutex
	g    *Gossip
	c    *pcluster.Cluster
	rdv  *Rendezvous // over the members last published
	subs []func(Event)
	// placements are the last topologies published, oldest first, for
	// Moved; serving is when the others last may have begun to place
	// identities on it (GossipConfig.Serving).
	placements []placement
	serving    time.Time
	// kinds, beforeJoin and onServe are what Host added.
	kinds      []string
	beforeJoin func() error
	onServe    func()

	pubMu sync.Mutex // one publish at a time, so the newest list is the last
}

// Subscribe registers f for membership events from the member's start on
// (f runs after proto.actor has the new member list).
func (p *Provider) Subscribe(f func(Event)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subs = append(p.subs, f)
}

// NewProvider makes a provider; the gossip starts with the member.
func NewProvider(cfg GossipConfig) *Provider { return &Provider{cfg: cfg} }

// Gossip is the membership, once the member started.
func (p *Provider) Gossip() *Gossip {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.g
}

// Host makes the member advertise kinds it hosts outside proto.actor's
// activation (actors.ClusterDirectory's lease and view actors), so that
// Owner places them as proto.actor places its own, and run beforeJoin in
// StartMember once the actor remote listens and before the gossip joins:
// what other members address by name exists before any can learn of this
// member. onServe (optional) runs whenever the others may begin to place
// identities here (GossipConfig.Serving), which can be seconds into
// StartMember: a fenced incarnation waits there until it may serve. Call
// it before the member starts.
func (p *Provider) Host(kinds []string, beforeJoin func() error, onServe func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kinds, p.beforeJoin, p.onServe = append(p.kinds, kinds...), beforeJoin, onServe
}

// servingNow notes that the others may begin to place identities here
// (GossipConfig.Serving) and tells Host's onServe.
func (p *Provider) servingNow() {
	p.mu.Lock()
	p.serving = time.Now()
	f := p.onServe
	p.mu.Unlock()
	if f != nil {
		f()
	}
}

func (p *Provider) StartMember(c *pcluster.Cluster) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return fmt.Errorf("cluster: actor address: %w", err)
	}
	p.mu.Lock()
	kinds, beforeJoin := p.kinds, p.beforeJoin
	p.mu.Unlock()
	if beforeJoin != nil {
		if err := beforeJoin(); err != nil {
			return err
		}
	}
	cfg := p.cfg
	cfg.Meta.ID, cfg.Meta.Actor = c.ActorSystem.ID, net.JoinHostPort(host, strconv.Itoa(port))
	// The kinds given in the config or hosted (outside proto.actor's
	// activation, see Host) and proto.actor's own.
	kinds = append(append(slices.Clone(cfg.Meta.Kinds), kinds...), c.GetClusterKinds()...)
	cfg.Meta.Kinds = slices.Compact(slices.Sorted(slices.Values(kinds)))
	cfg.Serving = p.servingNow
	g, err := NewGossip(cfg)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.g, p.c = g, c
	subs := p.subs
	p.mu.Unlock()
	g.Subscribe(func(ev Event) {
		resetEndpoint(c, ev)
		p.publish()
		for _, f := range subs {
			f(ev)
		}
	})
	p.publish()
	return nil
}

// resetEndpoint drops proto.actor's connection to the actor address of a
// member that joined, failed, left or restarted (Event.Restarted: a new
// incarnation seen only as an update), before the topology names it. Its
// endpoint writer keys on the address alone, and one whose member stopped
// answering keeps its mailbox blocked retrying the connection (5 tries, 2 s
// apart); a new incarnation at the same address (a fenced node re-executed
// with a fixed --remote-port, as in containers) then gets nothing for up
// to 10 s, and what was queued for it is dropped when that writer finally
// gives up: views moved to it settled without their devices (found by the
// docker backend's partition scenario). Without the endpoint, the next
// message opens a new one; a writer still retrying stops when it reads the
// event, and what it held was for the dead incarnation. A restart seen
// only as an update left that writer retrying, its mailbox growing with
// what was sent meanwhile (the churn scenario's heap in proto.actor's
// endpoint writers after fences, issue 13).
func resetEndpoint(c *pcluster.Cluster, ev Event) {
	if ev.Meta.Actor == "" || (ev.Kind == EventUpdated && !ev.Restarted) {
		return
	}
	c.ActorSystem.EventStream.Publish(&remote.EndpointTerminatedEvent{Address: ev.Meta.Actor})
}

func (p *Provider) StartClient(*pcluster.Cluster) error {
	return fmt.Errorf("cluster: client-only members are not supported")
}

// publish gives proto.actor the alive members. It runs on the gossip's
// delivery goroutine (or once at start), so calls never overlap.
func (p *Provider) publish() {
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	p.mu.Lock()
	g, c := p.g, p.c
	p.mu.Unlock()
	if g == nil || c == nil {
		return
	}
	var members []*pcluster.Member
	for _, m := range g.Members() {
		meta, ok := g.Meta(m.ID)
		if !ok || !placeable(m, meta, p.cfg.Name, c.Remote.BlockList().IsBlocked) {
			continue
		}
		if pm := placedMember(meta.ID, meta.Actor, meta.Kinds); pm != nil {
			members = append(members, pm)
		}
	}
	rdv := rendezvousOf(members)
	p.mu.Lock()
	p.rdv = rdv
	p.placements = append(p.placements, placement{at: time.Now(), rdv: rdv})
	if len(p.placements) > maxPlacements {
		p.placements = slices.Delete(p.placements, 0, len(p.placements)-maxPlacements)
	}
	p.mu.Unlock()
	c.MemberList.UpdateClusterTopology(members)
}

// placeable reports whether member m (meta: its gossip metadata) takes
// identities, as self sees it:
//
//   - a member that was declared dead and refuted it comes back under its
//     old actor system id, which proto.actor blocked for good: it is left
//     out here too, so Owner hashes over what proto.actor places on (the
//     node fences itself and restarts with a new id);
//   - a fenced node's new incarnation joins the gossip while it waits to
//     serve (rejoin.go), its own placement not yet running: what was placed
//     on it went astray (a lease there sent its device's up to a view only
//     it placed there, and the view every other member used settled
//     without the device: the chaos harness, partition-2-2-1-lease). It is
//     placed once it serves (Event.Served); self publishes only once it
//     serves.
func placeable(m Member, meta Meta, self string, blocked func(id string) bool) bool {
	if m.State != Alive || meta.ID == "" || blocked(meta.ID) {
		return false
	}
	return !meta.Fenced || m.ID == self
}

// Owner is the remote address of the member that owns identity of kind,
// by the same rendezvous hashing proto.actor places it with, over the
// members last handed to it; "" before the first.
func (p *Provider) Owner(kind, identity string) string {
	p.mu.Lock()
	rdv := p.rdv
	p.mu.Unlock()
	return rdv.Owner(kind, identity)
}

// Self, Members, Gone, Doubt, Silent and Meta are the gossip's (see Gossip), with
// no member before it started: Provider is the Roster of a member's
// actors.

func (p *Provider) Self() Member {
	if g := p.Gossip(); g != nil {
		return g.Self()
	}
	return Member{ID: p.cfg.Name, State: Alive}
}

func (p *Provider) Members() []Member {
	if g := p.Gossip(); g != nil {
		return g.Members()
	}
	return nil
}

func (p *Provider) Gone(actor string) bool {
	g := p.Gossip()
	return g != nil && g.Gone(actor)
}

func (p *Provider) Doubt() time.Duration {
	if g := p.Gossip(); g != nil {
		return g.Doubt()
	}
	return 0
}

func (p *Provider) Silent() bool {
	g := p.Gossip()
	return g != nil && g.Silent(time.Now())
}

func (p *Provider) Meta(id string) (Meta, bool) {
	if g := p.Gossip(); g != nil {
		return g.Meta(id)
	}
	return Meta{}, false
}

var _ Roster = (*Provider)(nil)

// Shutdown leaves the gossip (graceful) or just stops it.
func (p *Provider) Shutdown(graceful bool) error {
	g := p.Gossip()
	if g == nil {
		return nil
	}
	if graceful {
		return g.Leave(time.Second)
	}
	g.Shutdown()
	return nil
}
