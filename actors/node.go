package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/internal/quietlog"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/presence-im/presence/webhook"
	"github.com/prometheus/client_golang/prometheus"
)

// Deps is what a node is made of.
type Deps struct {
	NodeID string
	Timing config.Timing
	// Limits bound what one client can make the node hold: subscriptions
	// per connection, devices per user (docs/operations.md "Limits");
	// zero fields take config.DefaultLimits.
	Limits   config.Limits
	Seed     int64 // seeds each connection's jitter with its conn id
	Policies store.PolicyStore
	History  store.HistoryStore
	Metrics  *Metrics     // nil: unregistered collectors
	Logger   *slog.Logger // nil: discard
	// Degrade is when the node degrades its batched subscriptions to pull
	// (all zero: config.DefaultDegrade; At 0 with the rest set: never).
	Degrade config.Degrade
	// Changes receives every user's change as its view publishes it (the
	// webhooks: package webhook); nil: none.
	Changes ChangeSink
	// Cluster makes the node a member of a gossip cluster whose lease and
	// view actors are spread over the members (ClusterDirectory); nil: a
	// node alone.
	Cluster *ClusterOptions
}

// ChangeSink takes users' changes; Changed must not block (it runs in
// the view's Receive).
type ChangeSink interface {
	Changed(webhook.Event)
}

// OwnsView reports whether this node owns the user's view now.
func (n *Node) OwnsView(user string) bool { return n.owns(KindView, user) }

// ClusterOptions are a cluster member's settings.
type ClusterOptions struct {
	// Member is the gossip membership the node joins through
	// (cluster.NewProvider); its gossip starts with the node.
	Member ClusterMember
	// Key is the cluster key: the actor remote's mutual TLS derives from
	// it (cluster.RemoteConfig), as the gossip's encryption does.
	Key        []byte
	RemoteHost string // the proto.actor remote binds here
	RemotePort int    // on this port; 0: a free one
	// RemoteAdvertise is the host:port the others reach the remote at;
	// "": its bound address.
	RemoteAdvertise string
	// Propagation is how much later the last member learns of a change
	// than the first (cluster.Propagation): connections wait this long
	// before re-registering, so that every member routes alike.
	Propagation time.Duration
}

// ClusterMember is what a node joins its cluster through: proto.actor's
// provider over the gossip, the Roster the node's actors read, the kinds
// the node hosts and the membership's events (cluster.NewProvider).
type ClusterMember interface {
	pcluster.ClusterProvider
	cluster.Roster
	Host(kinds []string, beforeJoin func() error, onServe func())
	Subscribe(func(cluster.Event))
}

// Node is one node's actor system: its lease and view actors (through a
// Directory) and its gateway. Methods are safe for concurrent use.
type Node struct {
	deps    Deps
	sys     *actor.ActorSystem
	root    *actor.RootContext
	sched   *timers
	dir     Directory
	post    *courier // what connections and gateways send through dir
	metrics *Metrics
	log     *slog.Logger

	mu       sync.Mutex
	gateways []*Gateway
	stopOnce sync.Once

	// live counts this node's lease and view actors, by kindIndex.
	live [kindCount]atomic.Int64
	// index orders the live lease, view and connection actors by key for
	// the inspector (inspect.go), and a member's failure is told to every
	// lease and view actor in it; renewals counts accepted lease renewals.
	index    map[string]*registry
	renewals atomic.Uint64
	// hub writes views' events to this node's subscribing connections.
	hub *sinkHub
	// degrade watches the fan-out backlog (degrade.go).
	degrade *degradeWatch
	// realtimeFrames is presence_fanout_frames_total{tier="realtime"}.
	realtimeFrames prometheus.Counter
	// leaseProps and viewProps are shared by every lease and view actor of
	// the node, which takes its identity from births (births.go).
	leaseProps, viewProps *actor.Props
	births                births
	// envs are what the node's actors reach beyond their own state
	// (env.go): one per kind, shared by its actors.
	envs struct {
		lease *leaseEnv
		view  *viewEnv
		conn  *connEnv
	}

	cluster *pcluster.Cluster // nil alone
	// members is what the actors read of the membership: the cluster's
	// (ClusterOptions.Member), nil for a node alone.
	members cluster.Roster
	stall   *stallClock
	// events is this node's events actor; eventSinks the local ends of
	// Events streams (guarded by mu), to subscribe to members that join.
	events     atomic.Pointer[actor.PID]
	eventSinks map[string]*messages.EventsSubscribe
	// changedAt is the last membership change (join, failure, leave), in
	// unix nanoseconds.
	changedAt atomic.Int64
	// pool runs the mailboxes of the node's actors (dispatch.go).
	pool pooledDispatcher
}

// Fence makes the node give no more verdicts by time (lease expiry, stale
// connections, published offlines): its members may have declared it dead,
// and it is about to close its devices and restart (see cluster.FenceWatch).
func (n *Node) Fence() { n.stall.fenced.Store(true) }

// kindCount is the number of kinds of directory actors (lease, view).
const kindCount = 2

func kindIndex(k Kind) int {
	if k == KindLease {
		return 0
	}
	return 1
}

// activated counts a lease or view actor that started on this node.
func (n *Node) activated(kind Kind, identity string, pid *actor.PID) {
	n.live[kindIndex(kind)].Add(1)
	n.index[string(kind)].add(identity, pid)
	n.metrics.Activations.WithLabelValues(string(kind)).Inc()
}

// deactivated forgets a lease or view actor that is stopping.
func (n *Node) deactivated(kind Kind, identity string, pid *actor.PID) {
	n.live[kindIndex(kind)].Add(-1)
	n.index[string(kind)].remove(identity, pid)
}

// handled counts a directory message an actor handled: received is the
// actor's own count, for passivation.
func (n *Node) handled(kind Kind, received *uint64) {
	*received++
	n.metrics.handled[kindIndex(kind)].Inc()
}

// passivate stops an idle lease or view actor if its directory agrees that
// no message is on its way to it (received: the directory messages it
// handled). If one is, it reports false and the actor stays: it re-arms
// its idle timer, and the message on its way may make it live again.
func (n *Node) passivate(ctx actor.Context, kind Kind, id string, received uint64) bool {
	if !n.dir.Passivate(kind, id, ctx.Self(), received) {
		n.log.Debug("passivation refused: a message is on its way", "kind", string(kind), "id", id)
		return false
	}
	n.metrics.Passivations.WithLabelValues(string(kind)).Inc()
	ctx.Stop(ctx.Self())
	return true
}

// propagation is how long connections and gateways wait after a
// membership change before acting on it (0 alone): see
// ClusterOptions.Propagation.
func (n *Node) propagation() time.Duration {
	if co := n.deps.Cluster; co != nil {
		return co.Propagation
	}
	return 0
}

// owns reports whether this node owns an identity (always, alone): an
// actor that is not the owner's is a leftover of an earlier topology.
func (n *Node) owns(kind Kind, identity string) bool { return n.dir.Owns(kind, identity) }

// stale reports whether a message came from a member this node declared
// dead or left (cluster.Roster.Gone): what a view there sent reaches a sink
// only once the network heals, after the view was re-created here or
// elsewhere, and would stand as the subscriber's newest state.
func (n *Node) stale(sender *actor.PID) bool {
	return sender != nil && n.goneAddr(sender.GetAddress())
}

// goneAddr reports whether addr is the actor address of a member this node
// declared dead or left (never its own).
func (n *Node) goneAddr(addr string) bool {
	if addr == n.sys.Address() {
		return false
	}
	return n.members != nil && n.members.Gone(addr)
}

// memberAlive reports whether addr is the actor address of another
// member alive now, not declared dead or left.
func (n *Node) memberAlive(addr string) bool {
	if addr == n.sys.Address() || n.members == nil || n.goneAddr(addr) {
		return false
	}
	for _, m := range n.members.Members() {
		if meta, ok := n.members.Meta(m.ID); ok && m.State == cluster.Alive && meta.Actor == addr {
			return true
		}
	}
	return false
}

// inDoubt is how long a death verdict has waited to be confirmed by
// enough members answering (cluster.Roster.Doubt; 0: none): verdicts by
// time wait.
func (n *Node) inDoubt() time.Duration {
	if n.members != nil {
		return n.members.Doubt()
	}
	return 0
}

// silent reports whether a member not declared dead has gone unheard
// here for long (cluster.Roster.Silent): a view re-created here waits for
// its verdict before it settles.
func (n *Node) silent() bool {
	return n.members != nil && n.members.Silent()
}

// earlier reports whether h is a connection of an earlier incarnation of
// its node: its gateway's member was declared dead or left (goneAddr), or
// it opened before the member of that name now alive started
// (cluster.Meta.Up; both on that member's clock). What such a connection's
// lease sent may arrive after the departure of that incarnation reached
// the views (each from its own node, Node.onMember), and would stand
// there for ever, its lease gone with the process or ended by the same
// departure (issue 13's ghosts).
func (n *Node) earlier(h *messages.Holder) bool {
	if gw := h.GetGateway(); gw != nil && n.goneAddr(gw.GetAddress()) {
		return true
	}
	var up int64
	if n.members != nil {
		if m, ok := n.members.Meta(h.GetNode()); ok {
			up = m.Up
		}
	}
	since := h.GetSinceMs()
	return up > 0 && since > 0 && since < up
}

// Address is the actor system's address (the remote's advertised
// host:port in a cluster).
func (n *Node) Address() string { return n.sys.Address() }

// Clustered reports whether the node is a cluster member.
func (n *Node) Clustered() bool { return n.cluster != nil }

// changedRecently reports whether the membership changed (this node
// joining included) within the last Timing.Settle: a view activated now
// may replace one that lived on another member, and its subscribers and
// devices are still re-attaching and re-registering. Later, identities
// only move with another change, so a view activated then is new.
//
// A fenced node's new incarnation is placed on only once the resolver lets
// it serve, seconds into its start (longer than settle), and the members
// it meets then reach no subscriber of its own (the provider subscribes
// once its gossip started), so its join counts from then (the provider's
// onServe, see join).
func (n *Node) changedRecently() bool {
	return n.members != nil && time.Since(n.lastChange()) < n.deps.Timing.Settle
}

// lastChange is when the membership last changed (a join, failure or
// leave, this node's own start in the cluster included).
func (n *Node) lastChange() time.Time { return time.Unix(0, n.changedAt.Load()) }

// changed notes a membership change at now (never earlier than the last).
func (n *Node) changed() {
	now := time.Now().UnixNano()
	for {
		at := n.changedAt.Load()
		if at >= now || n.changedAt.CompareAndSwap(at, now) {
			return
		}
	}
}

// mayHaveMoved reports whether an actor of identity, activated now, may
// replace one on another member: the membership changed within
// Timing.Settle and the identity's placement changed with it (rendezvous
// hashing over the topologies since). Others publish at the debounce.
func (n *Node) mayHaveMoved(kind Kind, identity string) bool {
	return n.changedRecently() && n.members.Moved(string(kind), identity, time.Now().Add(-n.deps.Timing.Settle))
}

// Gateway is a gateway actor and the node name its connections carry.
type Gateway struct {
	n    *Node
	node string
	pid  *actor.PID
	// connProps are shared by the gateway's connection actors, which take
	// their request from the node's births (births.go).
	connProps *actor.Props
	crashed   atomic.Bool
	conns     atomic.Int64 // live connection actors
	kept      atomic.Int64 // releases kept for a replay (gatewayActor.recent)
}

// Start builds a node and its default gateway (named deps.NodeID).
func Start(d Deps) (*Node, error) {
	n, err := newNode(d)
	if err != nil {
		return nil, err
	}
	if err := n.open(); err != nil {
		return nil, err
	}
	if _, err := n.StartGateway(d.NodeID); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

// newNode checks d and builds a node with its timers, stall clock and
// degrade watch running, no directory yet (open).
func newNode(d Deps) (*Node, error) {
	if err := d.Timing.Validate(); err != nil {
		return nil, err
	}
	if d.Policies == nil || d.History == nil {
		return nil, errors.New("actors: Deps.Policies and Deps.History are required")
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d.Limits = d.Limits.OrDefault()
	if d.Degrade == (config.Degrade{}) {
		d.Degrade = config.DefaultDegrade()
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics(nil)
	}
	pool, err := newPooledDispatcher(d.Logger)
	if err != nil {
		return nil, err
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(quietlog.New(d.Logger.Handler(), quietlog.ProtoActor)).With("lib", "protoactor")
	}))
	fewerRegistryMaps(sys, registryMaps)
	countDeadLetters(sys, d.Metrics.DeadLetters)
	n := &Node{deps: d, sys: sys, root: sys.Root, sched: newTimers(sys.Root), metrics: d.Metrics, log: d.Logger, stall: newStallClock(), index: newIndex(), hub: newSinkHub(), pool: pool}
	n.hub.overflow = n.overflowed
	n.realtimeFrames = d.Metrics.FanoutFrames.WithLabelValues("realtime")
	n.degrade = startDegradeWatch(n, d.Degrade)
	n.eventSinks = map[string]*messages.EventsSubscribe{}
	n.post = newCourier(n)
	n.environments()
	n.identityProps()
	return n, nil
}

// open gives the node its directory and the actors other members address
// by name: alone, a LocalDirectory; in a cluster, it joins (spawning them
// before). On an error what newNode started is stopped.
func (n *Node) open() (err error) {
	defer func() {
		if err != nil {
			n.pool.release(n.log)
			n.degrade.stop()
			n.stall.stop()
			n.sched.stopAll()
		}
	}()
	if n.deps.Cluster != nil {
		return n.join()
	}
	n.useDirectory(NewLocalDirectory(n.sys.Root, n.spawnIdentity))
	return n.spawnNamed()
}

// spawnNamed starts the actors other members address by name: fan-out,
// stats, inspector and events. In a cluster it runs once the actor remote
// listens and before the gossip announces this node (ClusterMember.Host), so that
// the name has the remote address (a sink on another node that stops must
// reach the events actor as Terminated) and exists before any member can
// learn of this node and send to it: an EventsSubscribe sent as a member
// sees this node join is never lost.
func (n *Node) spawnNamed() error {
	named := []struct {
		name string
		a    func() actor.Actor
	}{
		{FanoutName, func() actor.Actor { return fanoutActor{n} }},
		{StatsName, func() actor.Actor { return statsActor{n} }},
		{InspectorName, func() actor.Actor { return inspectorActor{n} }},
		{EventsName, func() actor.Actor { return &eventsActor{} }},
	}
	for _, s := range named {
		pid, err := n.sys.Root.SpawnNamed(actor.PropsFromProducer(s.a, n.dispatch()), s.name)
		if err != nil {
			return fmt.Errorf("actors: %s: %w", s.name, err)
		}
		if s.name == EventsName {
			n.events.Store(pid)
		}
	}
	return nil
}

// join starts the proto.actor cluster member over the gossip provider, with
// lease and view actors reached through a ClusterDirectory, and follows
// membership: a member that fails or leaves has its gateways'
// leases reclaimed here (gateway_down), and any change makes this node's
// connections re-register, since identities moved.
func (n *Node) join() error {
	co := n.deps.Cluster
	if co.Member == nil {
		return errors.New("actors: ClusterOptions.Member is required")
	}
	n.changed() // joining moves identities here
	// Lease and view actors are not proto.actor grains (see
	// ClusterDirectory), but members still advertise the kinds they host:
	// Owner places over them as proto.actor places grains. The named
	// actors are spawned once the remote listens, before the gossip joins.
	// The others may place on this member from its first try to join, or,
	// a fenced incarnation, once it tells them it serves (seconds after
	// its start): either is a change.
	co.Member.Host([]string{string(KindLease), string(KindView)}, n.spawnNamed, n.changed)
	co.Member.Subscribe(n.onMember) // from the first event on
	n.members = co.Member
	var ropts []remote.ConfigOption
	if co.RemoteAdvertise != "" {
		ropts = append(ropts, remote.WithAdvertisedHost(co.RemoteAdvertise))
	}
	rcfg, err := cluster.RemoteConfig(co.RemoteHost, co.RemotePort, co.Key, ropts...)
	if err != nil {
		return err
	}
	cfg := pcluster.Configure("presence", co.Member, disthash.New(), rcfg, pcluster.WithRequestTimeout(5*time.Second))
	n.cluster = pcluster.New(n.sys, cfg)
	// Before StartMember: other members may send to this node's directory
	// host at once.
	dir, err := NewClusterDirectory(n.sys, NewLocalDirectory(n.sys.Root, n.spawnIdentity),
		func(k Kind, id string) string { return co.Member.Owner(string(k), id) }, n.goneAddr, n.log)
	if err != nil {
		return err
	}
	n.useDirectory(dir)
	var startErr error
	func() {
		defer func() { // StartMember panics on error
			if r := recover(); r != nil {
				startErr = fmt.Errorf("actors: starting cluster member: %v", r)
			}
		}()
		n.cluster.StartMember()
	}()
	if startErr != nil {
		return startErr
	}
	// The gossip joined (a fenced node's new incarnation: once the
	// resolver let it serve): a change, as its joining moved identities.
	n.changed()
	return nil
}

// onMember runs on the gossip's delivery goroutine; it only sends.
func (n *Node) onMember(ev cluster.Event) {
	if ev.Member.ID == n.deps.NodeID {
		return
	}
	// A member back as a new incarnation that nobody here saw fail or
	// leave (cluster.Event.Restarted): its old incarnation's leases went
	// with that process, so its devices go as after a failure; else views
	// list them online for ever (ghosts). Every lease and view here hears
	// it once, from here: a view drops the devices held there (their
	// leases may have died with it), and a lease ended by it tells no view
	// that was here before (leaseActor.tellsView).
	restarted := ev.Kind == cluster.EventUpdated && ev.Restarted
	if ev.Kind == cluster.EventFailed || ev.Kind == cluster.EventLeft || restarted {
		n.log.Debug("member gone: reclaiming its leases", "member", ev.Member.ID, "how", string(ev.Kind), "restarted", restarted)
		down := &messages.GatewayDown{Node: ev.Member.ID}
		if !ev.LastHeard.IsZero() {
			down.LastHeardMs = ev.LastHeard.UnixMilli()
		}
		if restarted && ev.Meta.Up > 0 {
			down.OpenedBeforeMs = ev.Meta.Up // its new connections stay
		}
		for _, kind := range []Kind{KindLease, KindView} {
			for _, pid := range n.index[string(kind)].pids() {
				n.root.Send(pid, down)
			}
		}
	}
	if ev.Kind == cluster.EventUpdated {
		n.subscribeEvents(ev.Meta) // a new actor address (a restart); idempotent
		if !restarted && !ev.Served {
			return
		}
		// A restart is a leave and a join: what lived in the old process
		// is gone, so connections re-register below. A fenced member that
		// serves again enters the placement (the provider's placeable): a join.
	}
	if ev.Kind == cluster.EventJoined && ev.Meta.Fenced {
		// A fenced incarnation waiting to serve takes no identities
		// (the provider's placeable): nothing moved; its Served update will be the
		// join. (Its old incarnation's failure or leave came before.)
		n.subscribeEvents(ev.Meta)
		return
	}
	n.changed()
	n.emit(&messages.ObsEvent{Kind: "member", Member: ev.Member.ID, Reason: string(ev.Member.State)})
	if ev.Kind == cluster.EventJoined {
		n.subscribeEvents(ev.Meta)
	}
	n.mu.Lock()
	gws := n.gateways
	n.mu.Unlock()
	for _, g := range gws {
		n.root.Send(g.pid, topologyChanged{})
	}
}

// identityProps makes the node's two shared Props of lease and view
// actors: each actor takes its identity from the births (spawnIdentity).
func (n *Node) identityProps() {
	n.leaseProps = actor.PropsFromProducer(func() actor.Actor {
		return &leaseActor{env: n.envs.lease}
	}, perDeviceMailbox, n.dispatch())
	n.viewProps = actor.PropsFromProducer(func() actor.Actor { return &viewActor{env: n.envs.view} }, perDeviceMailbox, n.dispatch())
}

// perDeviceMailbox is the mailbox of the actors there are one or more of
// per device (connection, lease, view): proto.actor's lock-free unbounded
// mailbox holds an idle actor in two queue stubs, where its default one
// allocates a ring of 10 slots and a mutex up front. Most of these actors
// sit idle (heartbeats do not reach them), so the bytes an idle one holds
// count more than the throughput of a busy one (BENCHMARKS.md).
var perDeviceMailbox = actor.WithMailbox(actor.UnboundedLockfree())

// dispatch runs an actor's mailbox on the node's pool (pooledDispatcher).
func (n *Node) dispatch() actor.PropsOption { return actor.WithDispatcher(n.pool) }

func cutID(id string) (user, device string, ok bool) {
	for i := range len(id) {
		if id[i] == '/' {
			return id[:i], id[i+1:], true
		}
	}
	return id, "", false
}

// StartGateway starts another gateway in this node's actor system under its
// own node name: tests and the simulator use it to stand for several gateway
// nodes sharing one lease and view layer.
func (n *Node) StartGateway(name string) (*Gateway, error) {
	g := &Gateway{n: n, node: name}
	g.connProps = actor.PropsFromProducer(func() actor.Actor { return &connActor{g: g, env: n.envs.conn} }, perDeviceMailbox, n.dispatch())
	pid, err := n.root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &gatewayActor{g: g, env: n.envs.conn} }, n.dispatch()), "gateway-"+name)
	if err != nil {
		return nil, fmt.Errorf("actors: gateway %s: %w", name, err)
	}
	g.pid = pid
	n.mu.Lock()
	n.gateways = append(n.gateways, g)
	n.mu.Unlock()
	return g, nil
}

// Gateway returns the node's default gateway.
func (n *Node) Gateway() *Gateway {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.gateways[0]
}

// Node returns the node name of the gateway's connections.
func (g *Gateway) Node() string { return g.node }

// Crash stops the gateway and its connections as a killed process would:
// nothing is released, nothing renewed; their leases are left to expire
// (or to be reclaimed with GatewayDown).
func (g *Gateway) Crash() {
	g.crashed.Store(true) // before the stop: its children check it in Stopping
	_ = g.n.root.StopFuture(g.pid).Wait()
}

// Stop stops the gateway gracefully: each connection releases its lease
// with reason close and its socket is closed with 1001.
func (g *Gateway) Stop() { _ = g.n.root.StopFuture(g.pid).Wait() }

// Query returns a user's raw view state (devices, online, last seen).
func (n *Node) Query(ctx context.Context, user string) (*messages.ViewState, error) {
	return n.QueryAbove(ctx, user, 0)
}

// QueryAbove is Query with the view's version raised first (floor > 0) to
// at least floor and the wall time in ms: above what the view or an
// earlier incarnation of it published, and below its next change. The
// webhooks check a dead node's row this way (webhook.Config.Query): what
// they tell of the state at that version is newer than what the receiver
// has, and older than the view's next change.
func (n *Node) QueryAbove(ctx context.Context, user string, floor uint64) (*messages.ViewState, error) {
	if err := core.ValidID("user", user); err != nil {
		return nil, err
	}
	st, err := n.queryView(ctx, user, floor)
	if err != nil {
		return nil, err
	}
	if st.GetSettling() {
		return st, fmt.Errorf("actors: view %s: %w", user, ErrSettling)
	}
	return st, nil
}

// queryView reads the user's view state from the local view actor's own
// state when the directory can (viewReader: an active view here, nothing
// sent to it still queued; one that has not read the store yet is read
// on this goroutine), else asks the view with a ViewQuery: a lookup of an
// online user then waits for no mailbox (BENCHMARKS.md, lookup p99). A
// lookup raising the version (floor) always asks.
func (n *Node) queryView(ctx context.Context, user string, floor uint64) (*messages.ViewState, error) {
	if r, ok := n.dir.(viewReader); ok && floor == 0 {
		if st, ok := r.readView(ctx, user); ok {
			n.metrics.ViewReads.Inc()
			return st, nil
		}
	}
	res, err := n.dir.Request(ctx, KindView, user, &messages.ViewQuery{User: user, Floor: floor})
	if err != nil {
		return nil, err
	}
	return res.(*messages.ViewState), nil
}

// ErrSettling: the user's view was re-created after a membership change and
// its devices may still be re-registering; the state is unknown for up to
// Timing.Settle, never offline.
var ErrSettling = errors.New("settling after a membership change: state unknown")

// PolicyChanged tells a user's view to reload its policy.
func (n *Node) PolicyChanged(user string) {
	n.dir.Send(KindView, user, &messages.PolicyChanged{User: user})
}

// ApplyPolicy tells a user's view to reload its policy and returns once it
// did (a view not loaded reads it at its next need): whatever the view
// publishes after that, to any node's subscribers, is trimmed by the new
// policy. A blocked viewer gets nothing more once it returns; a PUT that
// only sent the change left a window in which a device coming up was
// published with the old one.
func (n *Node) ApplyPolicy(ctx context.Context, user string) error {
	_, err := n.dir.Request(ctx, KindView, user, &messages.PolicyChanged{User: user})
	return err
}

// Subscribe registers a raw sink actor (tests, the admin API) for target's
// changes as seen by viewer.
func (n *Node) Subscribe(target, viewer string, sink *actor.PID, requestID string) {
	n.dir.Send(KindView, target, &messages.ViewSubscribe{Target: target, Viewer: viewer, Sink: refOf(sink), RequestId: requestID})
}

// Counts returns the live actors on this node by kind.
func (n *Node) Counts() map[string]int {
	c := map[string]int{}
	for _, k := range []Kind{KindLease, KindView} {
		c[string(k)] = int(n.live[kindIndex(k)].Load())
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, g := range n.gateways {
		if !g.crashed.Load() {
			c["gateway"]++
			c["connection"] += int(g.conns.Load())
		}
	}
	return c
}

// System is the node's actor system (tests spawn probe actors in it).
func (n *Node) System() *actor.ActorSystem { return n.sys }

// Metrics returns the node's collectors.
func (n *Node) Metrics() *Metrics { return n.metrics }

// Stop stops the gateways (releasing their connections' leases), then every
// lease and view actor, then the actor system. It waits for all of them;
// later calls do nothing.
func (n *Node) Stop() { n.stopOnce.Do(n.stop) }

func (n *Node) stop() {
	defer n.pool.release(n.log) // last: the shutdown's own runs are on it
	defer n.stall.stop()
	defer n.degrade.stop()
	defer n.sched.stopAll()
	n.mu.Lock()
	gws := n.gateways
	n.mu.Unlock()
	for _, g := range gws {
		if !g.crashed.Load() {
			g.Stop()
		}
	}
	n.post.wait() // their releases and unsubscribes
	n.dir.Stop()
	n.post.wait()
	if n.cluster != nil {
		n.leave()
		return
	}
	n.sys.Shutdown()
}

// leave takes the member out of its cluster: it leaves the gossip (the
// others move its identities at once), waits for that to reach them all
// (propagation), then stops the actor system and the remote at once.
// proto.actor's graceful shutdown (Cluster.Shutdown(true)) ends with gRPC's
// graceful stop, which waits for the others' streams to this node to end,
// and they do not: it gives up after 10 s. A SIGTERM then took all of
// that to exit, and a rolling restart ran on two members that much longer
// (the rolling scenario, docs/bounds.md).
func (n *Node) leave() {
	if err := n.deps.Cluster.Member.Shutdown(true); err != nil {
		n.log.Warn("leaving the gossip", "err", err)
	}
	time.Sleep(n.propagation())
	n.cluster.Shutdown(false)
}
