package cluster

import (
	"context"
	"encoding/json"
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
	"time"

	"github.com/hashicorp/memberlist"
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

	mu      sync.Mutex
	members map[string]Member
	metas   map[string]Meta
	subs    []func(Event)
	queue   []Event
	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}
	joined  bool // it joined others at start (did not start a new cluster)
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

// NewGossip starts the memberlist, joins the seeds, and returns.
func NewGossip(cfg GossipConfig) (*Gossip, error) {
	start := time.Now()
	if cfg.Meta.Up == 0 {
		cfg.Meta.Up = start.UnixMilli()
	}
	meta, err := json.Marshal(cfg.Meta)
	if err != nil {
		return nil, err
	}
	if len(meta) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("cluster: node meta is %d bytes, at most %d", len(meta), memberlist.MetaMaxSize)
	}
	host, port, err := net.SplitHostPort(cfg.Bind)
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip address %q: %w", cfg.Bind, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip port %q: %w", port, err)
	}
	g := &Gossip{self: cfg.Meta, meta: meta, log: cfg.Logger, start: start, members: map[string]Member{}, metas: map[string]Meta{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	if g.log == nil {
		g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := profile(cfg.Preset)
	c.Name, c.BindAddr, c.BindPort, c.AdvertisePort = cfg.Name, host, p, p
	c.Delegate, c.Events = g, g
	c.SecretKey = cfg.Key
	c.Logger = log.New(memberlistLog{g.log}, "", 0)
	g.conf = c
	go g.deliver()
	ml, err := memberlist.Create(c)
	if err != nil {
		close(g.done)
		<-g.stopped
		return nil, fmt.Errorf("cluster: gossip: %w", err)
	}
	g.ml = ml
	switch {
	case cfg.Rejoin != nil:
		g.rejoin(cfg.Join, *cfg.Rejoin)
	case len(cfg.Join) > 0:
		if _, err := ml.Join(cfg.Join); err != nil {
			_ = ml.Shutdown()
			close(g.done)
			<-g.stopped
			return nil, fmt.Errorf("cluster: joining %v: %w", cfg.Join, err)
		}
	}
	g.joined = ml.NumMembers() > 1
	return g, nil
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

func (g *Gossip) enqueue(kind EventKind, n *memberlist.Node) {
	var meta Meta
	_ = json.Unmarshal(n.Meta, &meta)
	state := map[EventKind]State{EventJoined: Alive, EventUpdated: Alive, EventLeft: Left, EventFailed: Dead}[kind]
	ev := Event{Kind: kind, Meta: meta, At: time.Now(), Member: Member{ID: n.Name, Addresses: []string{n.Address(), meta.Actor}, State: state, Since: time.Now()}}
	g.mu.Lock()
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
		for i, ev := range q {
			if ev.Kind == EventFailed && (ev.Meta.Leaving || g.metas[ev.Member.ID].Leaving) {
				ev.Kind, ev.Member.State = EventLeft, Left
				q[i] = ev
			}
			if ev.Kind == EventUpdated {
				if old, ok := g.members[ev.Member.ID]; ok {
					ev.Member.Since = old.Since
				}
			}
			g.members[ev.Member.ID] = ev.Member
			g.metas[ev.Member.ID] = ev.Meta
		}
		subs := slices.Clone(g.subs)
		g.mu.Unlock()
		for _, ev := range q {
			for _, f := range subs {
				f(ev)
			}
		}
	}
}

// memberlistLog turns memberlist's "[LEVEL] memberlist: text" lines into
// slog records at that level.
type memberlistLog struct{ l *slog.Logger }

func (w memberlistLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for prefix, l := range map[string]slog.Level{"[DEBUG] ": slog.LevelDebug, "[INFO] ": slog.LevelInfo, "[WARN] ": slog.LevelWarn, "[ERR] ": slog.LevelError} {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			line, level = rest, l
			break
		}
	}
	w.l.Log(context.Background(), level, line, "lib", "memberlist")
	return len(p), nil
}
