package actors

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Each kind of actor reaches what lies beyond its own state through an
// environment: a leaseEnv, a viewEnv, or a connEnv for connections and
// their gateway. The node builds one of each (Node.environments) and its
// actors of that kind share it, so an actor holds one pointer, not the
// node. Its fields are all the actor depends on; the node's part comes as
// small interfaces the node implements (residence, guard, placement,
// staleness, carrier), so a test can build an actor on fakes.

// identityEnv is what lease and view actors both use.
type identityEnv struct {
	timing  *config.Timing // the node's
	sched   *timers        // their timers
	births  *births        // what each one starts from
	metrics *Metrics
	log     *slog.Logger
	life    residence
	guard   guard
	place   placement
	emit    func(*messages.ObsEvent) // to the node's events actor (Node.emit)
}

// leaseEnv is a lease actor's environment.
type leaseEnv struct {
	identityEnv
	floors   store.HistoryStore // the devices' attempt floors
	dir      sender             // the user's view is told through it
	renewals *atomic.Uint64     // accepted renewals, for the node's counts (statsActor)
}

// viewEnv is a view actor's environment.
type viewEnv struct {
	identityEnv
	policies store.PolicyStore
	history  store.HistoryStore // the user's last seen
	changes  ChangeSink         // nil: none
	reader   viewReader         // lets lookups read the view's state (nil: none)
	// fanout hands an event to sinks on this node (Node.fanout); pushLate
	// tells the degrade watch how far the push path runs behind upstream
	// of it (sinkHub.took).
	fanout   func(p *messages.Presence, sinks []*actor.PID)
	pushLate func(time.Duration)
}

// connEnv is the environment of connection actors and their gateway.
type connEnv struct {
	timing        *config.Timing // the node's
	seed          int64          // seeds each connection's jitter
	subscriptions int            // a connection's limit (config.Limits)
	propagation   time.Duration  // how long to wait after a membership change (ClusterOptions)
	place         placement      // the membership, as the node sees it
	sched         *timers
	births        *births
	metrics       *Metrics
	frames        prometheus.Counter // presence_fanout_frames_total{tier="realtime"}
	log           *slog.Logger
	root          *actor.RootContext
	post          carrier   // to lease and view actors, off the mailbox (courier)
	index         *registry // the live connections, for the inspector
	hub           *sinkHub  // the node's fan-out to subscribing connections
	degrade       *degradeWatch
	guard         guard
	stale         staleness
}

// residence is how a lease or view actor lives on its node (Node): it
// counts itself live from its start to its stop, counts the directory
// messages it handles, and stops when idle if its directory agrees.
type residence interface {
	activated(kind Kind, identity string, pid *actor.PID)
	deactivated(kind Kind, identity string, pid *actor.PID)
	handled(kind Kind, received *uint64)
	passivate(ctx actor.Context, kind Kind, id string, received uint64) bool
}

// guard stands in front of every verdict by time (Node.gate).
type guard interface {
	gate(ctx actor.Context, g gate) bool
}

// placement is what lease and view actors read of the membership (Node).
type placement interface {
	mayHaveMoved(kind Kind, identity string) bool
	lastChange() time.Time
	silent() bool
	earlier(h *messages.Holder) bool
	memberAlive(addr string) bool
}

// staleness tells a message from a member this node declared dead, to
// drop (Node.dropStale).
type staleness interface {
	dropStale(ctx actor.Context, about string) bool
}

// sender sends to an actor by identity (a Directory).
type sender interface {
	Send(kind Kind, identity string, msg any)
}

// carrier carries messages to lease and view actors off the sender's
// mailbox (courier).
type carrier interface {
	send(kind Kind, id string, msg any)
	request(kind Kind, id string, msg any, timeout time.Duration, reply func(any, error))
}

// environments builds the node's environments; useDirectory completes
// them with the directory.
func (n *Node) environments() {
	id := identityEnv{timing: &n.deps.Timing, sched: n.sched, births: &n.births, metrics: n.metrics, log: n.log,
		life: n, guard: n, place: n, emit: n.emit}
	n.envs.lease = &leaseEnv{identityEnv: id, floors: n.deps.History, renewals: &n.renewals}
	n.envs.view = &viewEnv{identityEnv: id, policies: n.deps.Policies, history: n.deps.History, changes: n.deps.Changes,
		fanout: n.fanout, pushLate: n.hub.took}
	n.envs.conn = &connEnv{timing: &n.deps.Timing, seed: n.deps.Seed, subscriptions: n.deps.Limits.Subscriptions, propagation: n.propagation(),
		place: n, sched: n.sched, births: &n.births, metrics: n.metrics, frames: n.realtimeFrames, log: n.log, root: n.root, post: n.post,
		index: n.index[KindConnection], hub: n.hub, degrade: n.degrade, guard: n, stale: n}
}

// useDirectory makes d the directory of the node and of its actors.
func (n *Node) useDirectory(d Directory) {
	n.dir = d
	n.envs.lease.dir = d
	n.envs.view.reader, _ = d.(viewReader)
}
