package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/presence-im/presence/internal/quietlog"
)

// Meta is what a member tells the others about itself, carried in
// memberlist's node metadata (at most 512 bytes).
type Meta struct {
	ID     string   `json:"i,omitempty"` // proto.actor actor system id (new on every start)
	Actor  string   `json:"a"`           // proto.actor remote host:port
	Listen string   `json:"l,omitempty"` // device WebSocket
	Admin  string   `json:"m,omitempty"` // admin API
	Kinds  []string `json:"k,omitempty"` // cluster kinds it hosts
	// Up is when this incarnation started (unix ms): the split-brain
	// resolver's tie-break keeps the side holding the oldest member.
	Up int64 `json:"u,omitempty"`
	// Leaving is set just before a graceful leave: memberlist reports a
	// leave and a failure through the same callback and does not tell them
	// apart there.
	Leaving bool `json:"x,omitempty"`
	// Fenced is set while a fenced node's new incarnation waits to serve
	// (rejoin.go): under the lease strategy it does not count toward
	// another fenced node's verdict.
	Fenced bool `json:"f,omitempty"`
	// Blocked names the actor system ids of members this node declared
	// dead that came back alive under the same id (Gossip.Blocked): they
	// must fence (fence.go), since proto.actor blocked them here.
	Blocked []string `json:"b,omitempty"`
}

// EventKind says what happened to a member.
type EventKind string

const (
	EventJoined  EventKind = "joined"
	EventLeft    EventKind = "left"   // graceful leave
	EventFailed  EventKind = "failed" // declared dead by the failure detector
	EventUpdated EventKind = "updated"
)

// Event is one membership change, delivered in order to subscribers.
type Event struct {
	Kind   EventKind
	Member Member
	Meta   Meta
	At     time.Time
	// LastHeard, on a failed or left member, is when this member last
	// heard from it: its last acked probe, its join or metadata update
	// (zero: never). The crash happened after it, so a latency measured
	// from it is never less than the real one (see docs/operations.md).
	LastHeard time.Time
	// Restarted, on an update, says the member is a new incarnation under
	// the same name (another actor system id, Meta.ID) that nobody here
	// saw fail or leave: a fenced node re-executed itself and its leave
	// was lost or late. Its old incarnation is gone as after a failure.
	Restarted bool
	// Served, on an update, says the member's incarnation stopped waiting
	// to serve (a fenced node's rejoin cleared Meta.Fenced): it enters the
	// placement now (Provider), as at a join.
	Served bool
}

// GossipConfig configures a Gossip membership.
type GossipConfig struct {
	Name   string   // unique member name (the node id)
	Bind   string   // host:port of the gossip socket; port 0 picks one
	Join   []string // seeds; empty starts a new cluster
	Key    []byte   // 16, 24 or 32 bytes: encrypt gossip; nil: clear
	Preset string   // "seed" (memberlist's LAN profile) or "fast"
	Meta   Meta
	Logger *slog.Logger
	// Rejoin is set on a fenced node's new incarnation: it keeps trying
	// the seeds until the split-brain resolver lets it serve (rejoin.go).
	Rejoin *Rejoin
	// Advertise is the host:port (an IP) the others reach the gossip at,
	// when it differs from Bind (NAT, containers, 0.0.0.0); "": Bind's,
	// or a private IP of this host when Bind's host is unspecified.
	Advertise string
	// Serving, if set, runs when the others may begin to place identities
	// on this member: before each try to join the seeds, and before a
	// fenced incarnation tells the others it serves (rejoin.go). Seconds
	// may pass between the gossip's start and then (seeds not up yet, a
	// fenced wait), and what is activated here from then on may replace
	// an actor that lived on another member (Provider.Moved).
	Serving func()
	// JoinRetry keeps trying the seeds, once a second and resolving their
	// names again each time (a seed's container or pod may not exist yet),
	// until one answers or this long has passed; 0: one try.
	JoinRetry time.Duration
	// Context ends the join's retries early (the process is stopping);
	// nil: never.
	Context context.Context
	// Resolve looks a seed's host name up; nil: net.DefaultResolver.
	Resolve func(ctx context.Context, host string) ([]string, error)
}

// Gossip is a Membership over hashicorp/memberlist. Subscribers are called
// in order from one goroutine, never under memberlist's locks.
type Gossip struct {
	ml   *memberlist.Memberlist
	conf *memberlist.Config
	self Meta

	metaMu sync.Mutex
	meta   []byte
	log    *slog.Logger
	start  time.Time
	preset string
	doubt  doubt // after a death verdict (doubt.go)

	mu      sync.Mutex
	members map[string]Member
	metas   map[string]Meta
	gone    map[string]time.Time // actor addresses of members declared dead or left (Gone)
	heard   map[string]time.Time // members' last sign of life here (Event.LastHeard)
	subs    []func(Event)
	queue   []Event
	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}
	joined  bool // it joined others at start (did not start a new cluster)
	// joinedAt is set once NewGossip's join is done; refuted when, after
	// that, memberlist refuted a death verdict on this node (fence.go).
	joinedAt atomic.Bool
	refuted  atomic.Bool
	// revenants are the actor system ids of members declared dead here
	// and alive again under the same id (Blocked).
	revenants map[string]bool
}

// refutedDeath files memberlist's refute of a death verdict on this node,
// unless it came while joining: a new incarnation answers its old one's
// death then.
func (g *Gossip) refutedDeath() {
	if g.joinedAt.Load() {
		g.refuted.Store(true)
	}
}

// DeclaredDead reports whether other members declared this node dead after
// it joined (it refuted the verdict, so it is alive again in their tables,
// under an actor system id proto.actor blocked).
// Or an alive member names this node's actor system id in its Blocked:
// it declared this node dead and took it back under the same id, which
// this node cannot tell (its refute of the suspicion may have come after
// the verdict). It answers who said so, or "".
func (g *Gossip) DeclaredDead() string {
	if g.refuted.Load() {
		return "memberlist refuted a death verdict on it"
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, m := range g.members {
		if m.State == Alive && id != g.conf.Name && g.self.ID != "" && slices.Contains(g.metas[id].Blocked, g.self.ID) {
			return id + " names its actor system id among those it took back after a death verdict"
		}
	}
	return ""
}

// maxBlocked bounds Meta.Blocked (the metadata is at most 512 bytes).
const maxBlocked = 4

// Blocked are the actor system ids of members this node declared dead that
// are alive again under the same id (sorted; nil if none): proto.actor
// blocked them here and the placement leaves them out, so they must fence.
func (g *Gossip) Blocked() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for id, m := range g.members {
		if ms := g.metas[id]; m.State == Alive && g.revenants[ms.ID] {
			out = append(out, ms.ID)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), maxBlocked)]
}

// publishBlocked puts Blocked into this node's metadata if it changed and
// tells the others (not on the delivery goroutine: UpdateNode waits).
func (g *Gossip) publishBlocked() {
	blocked := g.Blocked()
	g.metaMu.Lock()
	if slices.Equal(blocked, g.self.Blocked) {
		g.metaMu.Unlock()
		return
	}
	g.self.Blocked = blocked
	b, err := json.Marshal(g.self)
	if err == nil {
		g.meta = b
	}
	g.metaMu.Unlock()
	if err == nil && g.ml != nil {
		go func() {
			if err := g.ml.UpdateNode(time.Second); err != nil {
				g.log.Warn("cluster: telling the others which members must fence", "err", err)
			}
		}()
	}
}

// profile returns the memberlist configuration of a preset.
func profile(preset string) *memberlist.Config {
	if preset == "fast" {
		c := memberlist.DefaultLocalConfig()
		c.ProbeInterval = 200 * time.Millisecond
		c.ProbeTimeout = 100 * time.Millisecond
		c.SuspicionMult = 2
		c.GossipInterval = 50 * time.Millisecond
		// memberlist's local profile sends each news to only 2 x log10(n+1)
		// members: in a 4-member cluster one in a few joins never reached a
		// member by gossip and waited for a push/pull (measured: cmd/presenced
		// TestClusterJoinIsInvisible under a loaded make test). 4, as in the
		// LAN profile, reaches every member of a small cluster in one round;
		// push/pull every second (under the fast TTL, 1.5 s) is the backstop
		// for a lost packet.
		c.RetransmitMult = 4
		c.PushPullInterval = time.Second
		return c
	}
	return memberlist.DefaultLANConfig()
}

// FailureDetection is the worst case from a node's crash to the others
// declaring it dead, for n members with the preset's settings: one probe
// interval until it is probed, the probe timeout, and the longest suspicion
// timeout (memberlist: SuspicionMult x max(1, log10 n) x ProbeInterval,
// times SuspicionMaxTimeoutMult without confirmations).
func FailureDetection(preset string, n int) time.Duration {
	c := profile(preset)
	scale := math.Max(1, math.Log10(float64(max(n, 1))))
	suspicion := time.Duration(float64(c.SuspicionMult) * scale * float64(c.ProbeInterval))
	return c.ProbeInterval + c.ProbeTimeout + suspicion*time.Duration(c.SuspicionMaxTimeoutMult)
}

// Propagation bounds how much later the last member learns of a failure
// than the first (the first to declare a member dead gossips it to all):
// ten gossip intervals and a probe timeout.
func Propagation(preset string) time.Duration {
	c := profile(preset)
	return 10*c.GossipInterval + c.ProbeTimeout
}

// encodeMeta is a node's gossip metadata, at most memberlist's size.
func encodeMeta(m Meta) ([]byte, error) {
	meta, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(meta) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("cluster: node meta is %d bytes, at most %d", len(meta), memberlist.MetaMaxSize)
	}
	return meta, nil
}

// NewGossip starts the memberlist, joins the seeds, and returns.
func NewGossip(cfg GossipConfig) (*Gossip, error) { return newGossip(cfg, nil) }

// newGossip is NewGossip over memberlist's network transport with wrap
// around it (nil: memberlist's own; tests: a partition).
func newGossip(cfg GossipConfig, wrap func(memberlist.Transport) memberlist.Transport) (*Gossip, error) {
	start := time.Now()
	if cfg.Meta.Up == 0 {
		cfg.Meta.Up = start.UnixMilli()
	}
	cfg.Meta.Fenced = cfg.Rejoin != nil
	meta, err := encodeMeta(cfg.Meta)
	if err != nil {
		return nil, err
	}
	host, p, err := splitBind(cfg.Bind)
	if err != nil {
		return nil, err
	}
	g := &Gossip{self: cfg.Meta, meta: meta, log: cfg.Logger, start: start, preset: cfg.Preset, members: map[string]Member{}, metas: map[string]Meta{}, gone: map[string]time.Time{}, heard: map[string]time.Time{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	g.doubt.pinger = memberlistPinger{g}
	if g.log == nil {
		g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := profile(cfg.Preset)
	c.Name, c.BindAddr, c.BindPort, c.AdvertisePort = cfg.Name, host, p, p
	if cfg.Advertise != "" {
		if c.AdvertiseAddr, c.AdvertisePort, err = splitAdvertise(cfg.Advertise); err != nil {
			return nil, err
		}
	}
	c.Delegate, c.Events, c.Ping, c.SecretKey = g, g, g, cfg.Key
	c.Logger = log.New(&memberlistLog{l: g.log, refuted: g.refutedDeath}, "", 0)
	g.conf = c
	if err := wrapTransport(c, wrap); err != nil {
		return nil, err
	}
	go g.deliver()
	ml, err := memberlist.Create(c)
	if err != nil {
		close(g.done)
		<-g.stopped
		return nil, fmt.Errorf("cluster: gossip: %w", err)
	}
	g.ml = ml
	join := g.join
	if cfg.Rejoin != nil {
		join = g.rejoin
	}
	if len(cfg.Join) > 0 || cfg.Rejoin != nil {
		if err := join(cfg); err != nil {
			_ = ml.Shutdown()
			close(g.done)
			<-g.stopped
			return nil, err
		}
	}
	g.joined = ml.NumMembers() > 1
	g.joinedAt.Store(true)
	return g, nil
}

// wrapTransport, given a wrap (tests: a partition), makes memberlist's
// network transport on c's bind address and puts wrap around it.
func wrapTransport(c *memberlist.Config, wrap func(memberlist.Transport) memberlist.Transport) error {
	if wrap == nil {
		return nil
	}
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{c.BindAddr}, BindPort: c.BindPort, Logger: c.Logger})
	if err != nil {
		return fmt.Errorf("cluster: gossip: %w", err)
	}
	if c.BindPort == 0 {
		c.BindPort, c.AdvertisePort = nt.GetAutoBindPort(), nt.GetAutoBindPort()
	}
	c.Transport = wrap(nt)
	return nil
}

// joinEvery is the pause between two tries of the seeds.
const joinEvery = time.Second

// join contacts the seeds until one answers: once without JoinRetry,
// for up to JoinRetry with it (rejoining after a fence: rejoin.go). Seed
// names are resolved again on every try. It stops when cfg.Context ends.
func (g *Gossip) join(cfg GossipConfig) error {
	ctx := cfg.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if cfg.JoinRetry > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.JoinRetry)
		defer cancel()
	}
	for try := 1; ; try++ {
		err := g.tryJoin(ctx, cfg)
		alone := errors.Is(err, errAlone)
		if err == nil || alone && cfg.JoinRetry == 0 {
			return nil
		}
		if cfg.JoinRetry == 0 {
			return fmt.Errorf("cluster: joining %v: %w", cfg.Join, err)
		}
		g.log.Warn("cluster: joining: retrying", "seeds", cfg.Join, "try", try, "err", err)
		select {
		case <-ctx.Done():
			if alone && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				g.log.Warn("cluster: no other seed answered within the join retry: starting a cluster of one", "seeds", cfg.Join)
				return nil
			}
			return fmt.Errorf("cluster: joining %v: gave up after %d tries (%w): %w", cfg.Join, try, context.Cause(ctx), err)
		case <-time.After(joinEvery):
		}
	}
}

// errAlone: the only seed that answered is this node, though others
// resolved. With JoinRetry the node keeps trying them until its deadline,
// so that nodes started together (compose) join each other rather than
// each starting a cluster of its own.
var errAlone = errors.New("no seed but this node answered")

// tryJoin resolves the seeds and contacts them once.
func (g *Gossip) tryJoin(ctx context.Context, cfg GossipConfig) error {
	addrs, err := resolveSeeds(ctx, cfg.Resolve, cfg.Join)
	if len(addrs) == 0 {
		return err
	}
	if cfg.Serving != nil {
		cfg.Serving()
	}
	if _, err := g.ml.Join(addrs); err != nil {
		return err
	}
	self := g.Addr()
	if g.ml.NumMembers() == 1 && slices.ContainsFunc(addrs, func(a string) bool { return a != self }) {
		return errAlone
	}
	return nil
}

// resolveSeeds turns host:port seeds into ip:port ones, every address a
// name has (a Kubernetes headless Service's name has one per pod). It
// fails only when no seed resolves.
func resolveSeeds(ctx context.Context, resolve func(context.Context, string) ([]string, error), seeds []string) ([]string, error) {
	if resolve == nil {
		resolve = net.DefaultResolver.LookupHost
	}
	var out []string
	var errs []error
	for _, s := range seeds {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("seed %q: %w", s, err))
			continue
		}
		if net.ParseIP(host) != nil {
			out = append(out, s)
			continue
		}
		ips, err := resolve(ctx, host)
		if err != nil {
			errs = append(errs, err)
		}
		for _, ip := range ips {
			out = append(out, net.JoinHostPort(ip, port))
		}
	}
	if len(out) == 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// splitBind splits the gossip's bind address into host and port.
func splitBind(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("cluster: gossip address %q: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", 0, fmt.Errorf("cluster: gossip port %q: %w", port, err)
	}
	return host, p, nil
}

// splitAdvertise parses an advertised ip:port.
func splitAdvertise(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("cluster: advertise address %q: must be ip:port", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", 0, fmt.Errorf("cluster: advertise port %q: %w", port, err)
	}
	return host, p, nil
}

// Addr is the gossip address others join.
func (g *Gossip) Addr() string { return g.ml.LocalNode().Address() }

// Subscribe registers f for every later event.
func (g *Gossip) Subscribe(f func(Event)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.subs = append(g.subs, f)
}

func (g *Gossip) Self() Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.members[g.conf.Name]; ok {
		return m
	}
	return Member{ID: g.conf.Name, State: Alive, Since: g.start}
}

func (g *Gossip) Members() []Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	return out
}

// Meta returns what a member said about itself.
func (g *Gossip) Meta(id string) (Meta, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.metas[id]
	return m, ok
}

// Leave tells the others this node is leaving (first in its metadata,
// then memberlist's leave), then shuts down.
func (g *Gossip) Leave(timeout time.Duration) error {
	leaving := g.self
	leaving.Leaving = true
	b, _ := json.Marshal(leaving)
	g.metaMu.Lock()
	g.meta = b
	g.metaMu.Unlock()
	err := g.ml.UpdateNode(timeout)
	if lerr := g.ml.Leave(timeout); err == nil {
		err = lerr
	}
	g.Shutdown()
	return err
}

// Shutdown stops gossiping without a word, as a crash would look to the
// others; later calls do nothing.
func (g *Gossip) Shutdown() {
	_ = g.ml.Shutdown()
	select {
	case <-g.done:
	default:
		close(g.done)
	}
	<-g.stopped
	g.doubt.wg.Wait()
}

// memberlist.Delegate: only the metadata is used.
func (g *Gossip) NodeMeta(int) []byte                 { return g.meta }
func (g *Gossip) NotifyMsg([]byte)                    {}
func (g *Gossip) GetBroadcasts(int, int) [][]byte     { return nil }
func (g *Gossip) LocalState(bool) []byte              { return nil }
func (g *Gossip) MergeRemoteState(buf []byte, _ bool) {}

// memberlist.EventDelegate: these run under memberlist's locks, so they
// only copy the node and queue the event.
func (g *Gossip) NotifyJoin(n *memberlist.Node)   { g.enqueue(EventJoined, n) }
func (g *Gossip) NotifyUpdate(n *memberlist.Node) { g.enqueue(EventUpdated, n) }
func (g *Gossip) NotifyLeave(n *memberlist.Node)  { g.enqueue(EventFailed, n) }

// memberlist.PingDelegate: an acked probe is the member's latest sign of
// life here. Memberlist probes one member per ProbeInterval in turn, so a
// live member's stamp is about a probe round ((n-1) x ProbeInterval) old,
// two at most (silentAfter).
func (g *Gossip) AckPayload() []byte { return nil }
func (g *Gossip) NotifyPingComplete(n *memberlist.Node, _ time.Duration, _ []byte) {
	now := time.Now()
	g.mu.Lock()
	g.heard[n.Name] = now
	g.mu.Unlock()
}

// Silent reports whether, at now, a member the table holds alive has
// given no sign of life here (an acked probe, a ping of the doubt, its
// join or an update) for longer than silentAfter: it may be dying, its
// death verdict still to come. A view re-created here waits for it before
// it settles (package actors): the leases of its devices may be on that
// member, where their connections' re-registers cannot reach them until
// the verdict moves them.
func (g *Gossip) Silent(now time.Time) bool {
	health := 0
	if g.ml != nil {
		health = g.ml.GetHealthScore()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	limit := silentAfter(g.conf, g.alive(), health)
	for id, at := range g.heard {
		if m := g.members[id]; id != g.conf.Name && m.State == Alive && now.Sub(at) > limit {
			return true
		}
	}
	return false
}

// silentAfter is how long a live member of n may go unheard here: two
// probe rounds and a probe timeout, twice that while this node's health
// is degraded (GetHealthScore > 0: failed probes, refutes), when
// memberlist lets a failing probe run longer. Memberlist probes the
// others in turn, in a new random order each round, so a live member is
// probed at least once in two. Twice at most: the node whose health is
// worst is one cut off alone, declaring the others dead one by one, and
// it is the one whose views must wait (memberlist stretches by up to 8).
// A member heard only through others (indirect probes) counts as silent:
// its views wait until their cap.
func silentAfter(c *memberlist.Config, n, health int) time.Duration {
	d := 2*time.Duration(max(n-1, 1))*c.ProbeInterval + c.ProbeTimeout
	if health > 0 {
		d *= 2
	}
	return d
}

func (g *Gossip) enqueue(kind EventKind, n *memberlist.Node) {
	var meta Meta
	_ = json.Unmarshal(n.Meta, &meta)
	state := map[EventKind]State{EventJoined: Alive, EventUpdated: Alive, EventLeft: Left, EventFailed: Dead}[kind]
	now := time.Now()
	ev := Event{Kind: kind, Meta: meta, At: now, Member: Member{ID: n.Name, Addresses: []string{n.Address(), meta.Actor}, State: state, Since: now}}
	g.mu.Lock()
	if kind == EventFailed { // memory follows live members
		ev.LastHeard = g.heard[n.Name]
		delete(g.heard, n.Name)
	} else {
		g.heard[n.Name] = now
	}
	g.queue = append(g.queue, ev)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// deliver applies queued events to the member table and calls subscribers.
func (g *Gossip) deliver() {
	defer close(g.stopped)
	for {
		select {
		case <-g.done:
			return
		case <-g.wake:
		}
		g.mu.Lock()
		q := g.queue
		g.queue = nil
		subs := slices.Clone(g.subs)
		g.mu.Unlock()
		for i, ev := range q {
			q[i] = g.apply(ev) // a death verdict with its doubt
			g.confirmDoubt()   // before anyone acts on it
		}
		g.publishBlocked()
		for _, ev := range q {
			g.logEvent(ev)
			for _, f := range subs {
				f(ev)
			}
		}
	}
}

// logEvent is the one line a member change gets at info (this node's own
// join and metadata updates at debug): what happened and where to reach
// the member.
func (g *Gossip) logEvent(ev Event) {
	level := slog.LevelInfo
	if ev.Kind == EventUpdated || ev.Member.ID == g.conf.Name {
		level = slog.LevelDebug
	}
	args := []any{"member", ev.Member.ID, "gossip", ev.Member.Addresses[0]}
	if ev.Kind == EventJoined {
		args = append(args, "actor", ev.Meta.Actor, "devices", ev.Meta.Listen, "admin", ev.Meta.Admin)
	}
	g.mu.Lock()
	args = append(args, "members", g.alive())
	g.mu.Unlock()
	g.log.Log(context.Background(), level, "member "+string(ev.Kind), args...)
}

// GoneFor is how long Gone remembers a dead member's actor address: longer
// than the kernel keeps retransmitting what a dead process left unsent
// (tcp_orphan_retries, a few minutes).
const GoneFor = 15 * time.Minute

// Gone reports whether actor (a proto.actor remote address) belonged to a
// member declared dead or left, not taken since by an alive one. Messages
// from it are stale: proto.actor's remote blocks a dead member's new
// connections but delivers what arrives on an open one, and what a
// partitioned or fenced member sent (or its kernel kept retransmitting
// after it exited) arrives once the network heals.
func (g *Gossip) Gone(actor string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.gone[actor]
	return ok
}

// apply enters ev into the member table and answers it as delivered: a
// failure of a member that was leaving is a leave; an update under a new
// actor system id is a restart. A member declared dead that is alive again
// under the same id is a revenant (Blocked): what it sends stays dropped.
//
// Unless it was declared dead while its metadata said Fenced: a fenced
// node's new incarnation waiting to serve, which nobody places on
// (placeable) and proto.actor never had in its topology here, so never
// blocked. It refuted a stale verdict, typically its old incarnation's
// death that a member it met only at the heal still gossiped, and fencing
// it again would only close the connections it took once it served (the
// chaos harness, partition-2-2-1-lease: a fenced incarnation declared dead
// 13 ms before it served, fenced again 1.2 s later).
func (g *Gossip) apply(ev Event) Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := ev.Member.ID
	if ev.Kind == EventFailed && (ev.Meta.Leaving || g.metas[id].Leaving) {
		ev.Kind, ev.Member.State = EventLeft, Left
	}
	if ev.Kind == EventUpdated {
		if old, ok := g.members[id]; ok {
			ev.Member.Since = old.Since
		}
		was := g.metas[id].ID
		ev.Restarted = was != "" && ev.Meta.ID != "" && was != ev.Meta.ID
		ev.Served = g.metas[id].Fenced && !ev.Meta.Fenced
	}
	old, had := g.members[id]
	revenant := had && old.State == Dead && ev.Member.State == Alive && ev.Meta.ID != "" && g.metas[id].ID == ev.Meta.ID && !g.metas[id].Fenced
	if revenant {
		if g.revenants == nil {
			g.revenants = map[string]bool{}
		}
		g.revenants[ev.Meta.ID] = true
		g.log.Warn("cluster: a member declared dead is alive again under the same id: it must fence", "member", id)
	} else if ev.Member.State == Alive && ev.Meta.ID != g.metas[id].ID {
		delete(g.revenants, g.metas[id].ID) // a new incarnation
	}
	g.members[id] = ev.Member
	g.metas[id] = ev.Meta
	if ev.Kind == EventFailed {
		g.markDoubt()
	}
	if !g.revenants[ev.Meta.ID] {
		g.noteGone(ev)
	}
	return ev
}

// noteGone files ev's actor address; g.mu held.
func (g *Gossip) noteGone(ev Event) {
	if ev.Meta.Actor == "" {
		return
	}
	if ev.Member.State == Alive {
		delete(g.gone, ev.Meta.Actor)
		return
	}
	for a, at := range g.gone {
		if ev.At.Sub(at) > GoneFor {
			delete(g.gone, a)
		}
	}
	g.gone[ev.Meta.Actor] = ev.At
}

// alive counts the members alive in the table; g.mu held.
func (g *Gossip) alive() int {
	n := 0
	for _, m := range g.members {
		if m.State == Alive {
			n++
		}
	}
	return n
}

// LogBurst is how long after a logged memberlist warning or error the next
// ones are only counted: anyone who can send to the gossip port can make
// memberlist log one ERROR per garbage packet, and a log must not be a
// way to fill a disk. The first line after the window says how many were
// left out.
const LogBurst = 10 * time.Second

// memberlistLog turns memberlist's "[LEVEL] memberlist: text" lines into
// slog records at that level, lowered by quietlog.Memberlist, with node
// metadata as text; warnings and errors one per LogBurst.
type memberlistLog struct {
	l *slog.Logger
	// refuted is called on memberlist's refute of a death verdict on this
	// node, before any warning is left out (its only sign of the verdict).
	refuted func()

	mu         sync.Mutex
	now        func() time.Time // nil: time.Now
	last       time.Time        // when the last warning or error was logged
	suppressed int              // warnings and errors left out since
}

// refuteDead begins memberlist's line for a refute of a death verdict on
// this node (state.go, deadNode, hashicorp/memberlist v0.7.0); no delegate
// tells of it.
const refuteDead = "Refuting a dead message"

func (w *memberlistLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for prefix, l := range map[string]slog.Level{"[DEBUG] ": slog.LevelDebug, "[INFO] ": slog.LevelInfo, "[WARN] ": slog.LevelWarn, "[ERR] ": slog.LevelError} {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			line, level = rest, l
			break
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	if w.refuted != nil && strings.HasPrefix(line, refuteDead) {
		w.refuted()
	}
	level = quietlog.Memberlist.Level(level, line)
	attrs := []any{"lib", "memberlist"}
	if level >= slog.LevelWarn {
		n, ok := w.admit()
		if !ok {
			return len(p), nil
		}
		if n > 0 {
			attrs = append(attrs, "suppressed", n)
		}
	}
	w.l.Log(context.Background(), level, quietlog.BytesAsText(line), attrs...)
	return len(p), nil
}

// admit says whether a warning or error may be logged now, and how many
// were left out since the last one that was.
func (w *memberlistLog) admit() (suppressed int, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := time.Now()
	if w.now != nil {
		t = w.now()
	}
	if !w.last.IsZero() && t.Sub(w.last) < LogBurst {
		w.suppressed++
		return 0, false
	}
	n := w.suppressed
	w.last, w.suppressed = t, 0
	return n, true
}
