package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/messages"
)

// InspectorName is the inspector actor's name on every node: it answers
// ActorsQuery with a page of the node's live actors of one kind, each
// actor's state read by the actor itself (GET /api/actors on any node).
const InspectorName = "inspector"

// The kinds of actors the inspector lists, and its page sizes.
const (
	KindGateway    = "gateway"
	KindConnection = "connection"
	// DefaultActorsPage is a page's size when the query names none;
	// MaxActorsPage the largest page a node answers.
	DefaultActorsPage = 50
	MaxActorsPage     = 200
)

// InspectKinds lists what ActorsQuery.kind may be.
var InspectKinds = []string{KindGateway, KindConnection, string(KindLease), string(KindView)}

// Errors of Inspect: the member is unknown, or not alive.
var (
	ErrUnknownMember = errors.New("actors: no such member")
	ErrMemberDown    = errors.New("actors: member not alive")
)

// stateTimeout bounds how long the inspector waits for one actor's state:
// an actor that does not answer in time is listed as unanswered.
const stateTimeout = 500 * time.Millisecond

type inspectorActor struct{ n *Node }

// Receive answers from a goroutine: asking up to a page of actors takes up
// to stateTimeout, and the inspector stays free for the next query.
func (a inspectorActor) Receive(ctx actor.Context) {
	if q, ok := ctx.Message().(*messages.ActorsQuery); ok && ctx.Sender() != nil {
		sender, n := ctx.Sender(), a.n
		go func() { n.root.Send(sender, n.inspectLocal(q, stateTimeout)) }()
	}
}

// newIndex makes the registries of the kinds the inspector pages over
// (gateways are few: the node's list).
func newIndex() map[string]*registry {
	return map[string]*registry{KindConnection: newRegistry(), string(KindLease): newRegistry(), string(KindView): newRegistry()}
}

// inspectLocal answers q from this node's registries: every actor of the
// page is asked for its state at once, each within timeout.
func (n *Node) inspectLocal(q *messages.ActorsQuery, timeout time.Duration) *messages.ActorsPage {
	page := &messages.ActorsPage{Node: n.deps.NodeID, Kind: q.GetKind()}
	limit := int(q.GetLimit())
	if limit <= 0 || limit > MaxActorsPage {
		limit = DefaultActorsPage
	}
	if q.GetKind() == KindGateway {
		return n.gatewayPage(page, q, limit)
	}
	reg := n.index[q.GetKind()]
	if reg == nil {
		return page
	}
	entries, next := reg.page(q.GetPrefix(), q.GetAfter(), limit)
	page.Next, page.Total = next, uint32(reg.len())
	futures := make([]*actor.Future, len(entries))
	for i, e := range entries {
		futures[i] = n.root.RequestFuture(e.pid, &messages.ActorStateQuery{}, timeout)
	}
	for i, f := range futures {
		res, err := f.Result()
		st, ok := res.(*messages.ActorState)
		if err != nil || !ok {
			st = &messages.ActorState{Unanswered: true}
		}
		st.Key, st.Pid = entries[i].key, entries[i].pid.GetId()
		if v := st.GetView(); v != nil {
			v.Subscribers = n.byMember(v.Subscribers)
		}
		page.Actors = append(page.Actors, st)
	}
	return page
}

// gatewayPage lists the live gateways; their state is atomics.
func (n *Node) gatewayPage(page *messages.ActorsPage, q *messages.ActorsQuery, limit int) *messages.ActorsPage {
	reg := newRegistry()
	byPID := map[string]*Gateway{}
	n.mu.Lock()
	for _, g := range n.gateways {
		if !g.crashed.Load() {
			reg.add(g.node, g.pid)
			byPID[g.pid.GetId()] = g
		}
	}
	n.mu.Unlock()
	entries, next := reg.page(q.GetPrefix(), q.GetAfter(), limit)
	page.Next, page.Total = next, uint32(reg.len())
	for _, e := range entries {
		g := byPID[e.pid.GetId()]
		page.Actors = append(page.Actors, &messages.ActorState{Key: e.key, Pid: e.pid.GetId(),
			State: &messages.ActorState_Gateway{Gateway: &messages.GatewayInfo{Connections: uint32(g.conns.Load())}}})
	}
	return page
}

// byMember renames a view's subscriber counts from actor addresses to
// member ids ("?" for an address no member has now).
func (n *Node) byMember(byAddr map[string]uint32) map[string]uint32 {
	out := make(map[string]uint32, len(byAddr))
	for addr, c := range byAddr {
		id := n.memberAt(addr)
		if id == "" {
			id = "?"
		}
		out[id] += c
	}
	return out
}

// memberAt is the id of the member whose actor system listens at addr
// (this node for its own address; "" if none).
func (n *Node) memberAt(addr string) string {
	if addr == n.sys.Address() || n.members == nil {
		return n.deps.NodeID
	}
	if g := n.members; g != nil {
		for _, m := range g.Members() {
			if meta, ok := g.Meta(m.ID); ok && meta.Actor == addr {
				return m.ID
			}
		}
	}
	return ""
}

// Inspect answers q for one member's actors ("" or this node's id: this
// node's), asking that member's inspector through the actor transport.
func (n *Node) Inspect(ctx context.Context, member string, q *messages.ActorsQuery) (*messages.ActorsPage, error) {
	if member == "" || member == n.deps.NodeID {
		return n.inspectLocal(q, min(stateTimeout, max(requestTimeout(ctx), time.Millisecond))), nil
	}
	g := n.members
	if g == nil {
		return nil, fmt.Errorf("%w: %q (this node is alone)", ErrUnknownMember, member)
	}
	i := slices.IndexFunc(g.Members(), func(m cluster.Member) bool { return m.ID == member })
	if i < 0 {
		return nil, fmt.Errorf("%w: %q", ErrUnknownMember, member)
	}
	meta, ok := g.Meta(member)
	if st := g.Members()[i].State; st != cluster.Alive || !ok || meta.Actor == "" {
		return nil, fmt.Errorf("%w: %q is %s", ErrMemberDown, member, st)
	}
	res, err := n.root.RequestFuture(actor.NewPID(meta.Actor, InspectorName), q, max(requestTimeout(ctx), time.Millisecond)).Result()
	if err != nil {
		return nil, fmt.Errorf("actors: inspecting %s: %w", member, err)
	}
	page, ok := res.(*messages.ActorsPage)
	if !ok {
		return nil, fmt.Errorf("actors: inspecting %s: answer %T", member, res)
	}
	return page, nil
}

// InspectAll answers q on every alive member at once, within ctx: pages by
// member id; a member that did not answer in time is listed in missing.
func (n *Node) InspectAll(ctx context.Context, q *messages.ActorsQuery) (pages map[string]*messages.ActorsPage, missing []string) {
	pages = map[string]*messages.ActorsPage{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range n.AliveMembers() {
		wg.Go(func() {
			page, err := n.Inspect(ctx, id, q)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				missing = append(missing, id)
				return
			}
			pages[id] = page
		})
	}
	wg.Wait()
	slices.Sort(missing)
	return pages, missing
}

// AliveMembers is this node and every other member the gossip has alive
// (their ids).
func (n *Node) AliveMembers() []string {
	out := []string{n.deps.NodeID}
	if g := n.members; g != nil {
		for _, m := range g.Members() {
			if m.ID != n.deps.NodeID && m.State == cluster.Alive {
				out = append(out, m.ID)
			}
		}
	}
	return out
}

// leaseInfo is a lease actor's state for the inspector.
func (a *leaseActor) info(now time.Time) *messages.ActorState {
	li := &messages.LeaseInfo{Holder: a.l.Holder, Floor: a.l.Floor}
	if a.l.Holder != nil {
		li.ExpiresInMs = a.l.ExpiresAt.Sub(now).Milliseconds()
		li.RenewedAgoMs = now.Sub(a.l.RenewedAt).Milliseconds()
	} else if a.l.Ended {
		li.Ended = a.l.EndedReason
	}
	return &messages.ActorState{State: &messages.ActorState_Lease{Lease: li}}
}

// info is a view actor's state for the inspector: subscribers by their
// node's actor address (inspectLocal names the members).
func (a *viewActor) info(now time.Time) *messages.ActorState {
	vi := &messages.ViewInfo{Status: "offline", Version: a.v.Version, Devices: uint32(a.v.Devices.Len()), Show: a.v.Presence(now).Show,
		Subscribers: map[string]uint32{}, Settled: !a.v.Unsettled}
	switch {
	case a.v.Uncertain():
		vi.Status = "settling"
	case a.v.Online:
		vi.Status = "online"
	}
	for key := range a.v.Subs {
		if sink := a.sinks[key]; sink != nil {
			vi.Subscribers[sink.GetAddress()]++
		}
	}
	if at, pending := a.v.PendingUntil(); pending {
		vi.DebounceInMs = max(at.Sub(now).Milliseconds(), 0)
	}
	if a.v.Unsettled {
		vi.SettleInMs = max(a.started.Add(a.env.timing.Settle).Sub(now).Milliseconds(), 0)
	}
	if !a.v.LastSeen.IsZero() {
		vi.LastSeenMs = a.v.LastSeen.UnixMilli()
	}
	return &messages.ActorState{State: &messages.ActorState_View{View: vi}}
}

// info is a connection actor's state for the inspector.
func (a *connActor) info(now time.Time) *messages.ActorState {
	return &messages.ActorState{State: &messages.ActorState_Connection{Connection: &messages.ConnInfo{
		User: a.user, Device: a.device, ConnId: a.id, Epoch: a.epoch, Gateway: a.g.node,
		LastAliveAgoMs: now.Sub(a.c.LastAlive).Milliseconds(), SinceMs: a.since.UnixMilli(),
		Active: a.active && !a.ended, Subscriptions: uint32(a.subscriptions()),
	}}}
}
