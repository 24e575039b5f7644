package chaos

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/presence-im/presence/bench"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/messages"
)

// Scenario is one fault.
type Scenario struct {
	Name  string
	About string
	run   func(ctx context.Context, e *Env, r *Round) error
	// Nodes is the cluster size it needs (it runs with that many whatever
	// --nodes says); 0: --nodes.
	Nodes int
}

// Scenarios lists what `chaos list` names.
var Scenarios = []Scenario{
	{"close", "the devices of one node close their connections", runClose, 0},
	{"half-open", "the devices of one node go silent without closing (a tunnel, a dead NAT)", runHalfOpen, 0},
	{"gateway-crash", "kill -9 one node: its devices, and the leases and views it hosted, are lost with it", runCrash, 0},
	{"pause", "SIGSTOP one node until the others declare it dead, then SIGCONT: it must fence and rejoin", runPause, 0},
	{"join", "a node joins while subscribers watch: identities move to it", runJoin, 0},
	{"partition", "cut one node off the others with iptables (2+1; --groups 4+5, 3+3+3: those sides): the majority serves, the others fence (3+3+3: all); after the heal one cluster", runPartition, 0},
	{"partition-lease", "--split-brain lease, cut one node off the others (2+1; --groups: those sides): the majority, if any, takes the lease first and serves, the others fence; after the heal one cluster", runPartition, 0},
	{"partition-2-2-1", "5 nodes cut 2+2+1 with iptables: no side has a majority, every side fences (majority rule); after the heal one cluster", runSplit, 5},
	{"partition-2-2-1-lease", "--split-brain lease, 5 nodes cut 2+2+1: the side that takes the lease serves, the others fence; after the heal one cluster", runSplit, 5},
	{"rolling", "SIGTERM and restart each node in turn under the same name, devices on the Go SDK: no offline, no fence", runRolling, 0},
	{"restart-storm", "kill -9 the node with the most SDK devices (of 3, a third): each reconnects elsewhere within 1 s (plus the failure detection if its lease or view died too) and is online again, no false offline", runStorm, 0},
	{"soak", "random kills, pauses, partitions and restarts for --duration, SDK devices, checked after each", runSoak, 0},
	{"kill-two", "kill -9 the youngest node, a stable period, then the next: the others serve on (of 3 the oldest, alone)", runKillTwo, 0},
	{"kill-seq", "kill -9 the --kills youngest nodes (default 3 from 5 nodes on, else 2) one after another, each past the stable period: the others serve on", runKillSeq, 0},
	{"kill-two-at-once", "kill -9 the two youngest nodes together: of 3 the survivor fences and waits (majority rule); of 4 or more the others serve on", runKillTwoAtOnce, 0},
	{"churn", "devices of --users distinct users connect in waves, subscribe to contacts and leave: live actors and memory follow the devices online and return to the baseline", runChurn, 0},
	{"kill-two-at-once-lease", "--split-brain lease: kill -9 the two oldest nodes together: the others serve on (of 3 the youngest, on the lease)", runKillTwoAtOnceLease, 0},
	{"store-down", "stop PostgreSQL (the nodes' store) for 15 s: connected devices stay online, handshakes get 503 with Retry-After until it is back, every departure's last seen is written once it is", runStore("store-down"), 0},
	{"store-pause", "SIGSTOP PostgreSQL for 15 s: as store-down, with every call hanging instead of failing", runStore("store-pause"), 0},
	{"store-slow", "PostgreSQL behind a proxy delaying each chunk 300 ms for 15 s: handshakes slow but each floor durable, nothing lost or false", runStore("store-slow"), 0},
	{"activity", "devices declare activities (active renewed, idle, background), kill -9 one node: after the failover the devices elsewhere show what they declared, in the route and to every watcher, and the new owners pass on the next declaration", runActivity, 0},
}

// Find returns the scenario called name.
func Find(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Env is one round's cluster and fleet.
type Env struct {
	Cluster *Cluster
	Fleet   *Fleet
	Bounds  map[string]float64 // GET /api/bounds, ms
	Timing  map[string]float64 // its "timing", ms
	Slack   time.Duration      // waiting past a bound before calling an event lost
	// Duration is how long soak goes on, Faults what it draws from.
	Duration time.Duration
	Faults   []string

	groups   []int                    // a partition's side sizes (--groups; 2+2+1)
	kills    int                      // kill-seq's crashes
	holdBack time.Duration            // the lease partitions freeze all but the last side (--hold-back)
	churn    *churnPlan               // the churn scenario's schedule
	store    *pgStore                 // the store scenarios' PostgreSQL
	load     *bench.Background        // --load's devices
	sdkLog   *os.File                 // the SDK sessions' log (sdkLogger)
	sdk      atomic.Pointer[sdkFleet] // the SDK sessions, once started (progress)
	say      func(string, ...any)     // a progress line
}

// devicesOn is the devices connected to n.
func (e *Env) devicesOn(n *Node) []*Device {
	var out []*Device
	for _, d := range e.Fleet.Devices {
		if d.Node == n {
			out = append(out, d)
		}
	}
	return out
}

// watchersBut is the watchers not on n.
func (e *Env) watchersBut(n *Node) []*Watcher {
	var out []*Watcher
	for _, w := range e.Fleet.Watchers {
		if w.Node != n {
			out = append(out, w)
		}
	}
	return out
}

// owners maps each device's user to the node ids hosting its view and its
// lease, by proto.actor's rendezvous hashing over the members' actor
// addresses as a node sees them.
type owners struct{ view, lease map[string]string }

func (e *Env) owners(ctx context.Context, from *Node) (owners, error) {
	var users, leases []string
	for _, d := range e.Fleet.Devices {
		users, leases = append(users, d.User), append(leases, d.User+"/phone")
	}
	view, err := ownersOf(ctx, from, "view", users)
	if err != nil {
		return owners{}, err
	}
	byLease, err := ownersOf(ctx, from, "lease", leases)
	lease := map[string]string{}
	for id, n := range byLease {
		lease[strings.TrimSuffix(id, "/phone")] = n
	}
	return owners{view, lease}, err
}

// lost reports whether d's view or lease lived on one of victims.
func (o owners) lost(d *Device, victims ...*Node) bool {
	return slices.ContainsFunc(victims, func(n *Node) bool { return o.view[d.User] == n.ID || o.lease[d.User] == n.ID })
}

// ownersOf maps each identity of kind to the node id hosting it, as from
// sees the members.
func ownersOf(ctx context.Context, from *Node, kind string, ids []string) (map[string]string, error) {
	ms, err := from.Members(ctx)
	if err != nil {
		return nil, err
	}
	var members []cluster.Placed
	byAddr := map[string]string{}
	for _, m := range ms {
		if m.State != "alive" || len(m.Addresses) < 2 {
			continue
		}
		members = append(members, cluster.Placed{Actor: m.Addresses[1], Kinds: []string{kind}})
		byAddr[m.Addresses[1]] = m.ID
	}
	place := cluster.NewRendezvous(members)
	out := map[string]string{}
	for _, id := range ids {
		out[id] = byAddr[place.Owner(kind, id)]
	}
	return out, nil
}

// awaitOffline waits until every watcher of ws has an offline event for
// every device of ds after since, or until deadline, then records each
// latency against its bound (from departed) or the event as lost.
func (e *Env) awaitOffline(r *Round, ws []*Watcher, ds []*Device, departed func(*Device) time.Time, bound func(*Device) (string, float64), deadline time.Time) {
	seen := func(w *Watcher, d *Device) (Event, bool) {
		for _, ev := range w.Events() {
			if ev.Target == d.User && ev.At.After(departed(d)) && ev.Status == messages.Status_offline {
				return ev, true
			}
		}
		return Event{}, false
	}
	for time.Now().Before(deadline) {
		all := true
		for _, w := range ws {
			for _, d := range ds {
				if _, ok := seen(w, d); !ok {
					all = false
				}
			}
		}
		if all {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, w := range ws {
		for _, d := range ds {
			name, b := bound(d)
			ev, ok := seen(w, d)
			if !ok {
				r.find("lost", d.User, w.User, fmt.Sprintf("no offline within %s_ms %.0f + slack %v", name, b, e.Slack))
				continue
			}
			r.Latencies = append(r.Latencies, Latency{Device: d.User, Watcher: w.User, Bound: name,
				Ms: float64(ev.At.Sub(departed(d)).Microseconds()) / 1000, BoundMs: b})
		}
	}
}

// checkStayed records a false offline for every event other than online
// that a watcher of ws got for a device of ds after since.
func (e *Env) checkStayed(r *Round, ws []*Watcher, ds []*Device, since time.Time) {
	for _, w := range ws {
		for _, ev := range w.Events() {
			if !ev.At.After(since) || ev.Status == messages.Status_online {
				continue
			}
			for _, d := range ds {
				if d.User == ev.Target {
					r.findAt(ev.At, "false_offline", d.User, w.User, fmt.Sprintf("%v at version %d at %s, still connected to %s (%s)", ev.Status, ev.Version, ev.At.UTC().Format("15:04:05.000"), d.Node.ID, d.health()))
				}
			}
		}
	}
}

// checkFinal: what each watcher of ws holds last for each device must be
// the truth: offline for those gone, online for those still connected (a
// lost or wrongly ordered event shows here).
func (e *Env) checkFinal(r *Round, ws []*Watcher, gone, stayed []*Device) {
	for _, w := range ws {
		for _, d := range gone {
			if ev, ok := w.Last(d.User); !ok || ev.Status != messages.Status_offline {
				r.find("wrong_final", d.User, w.User, fmt.Sprintf("holds %v, the device left", ev.Status))
			}
		}
		for _, d := range stayed {
			if ev, ok := w.Last(d.User); !ok || ev.Status != messages.Status_online {
				r.find("wrong_final", d.User, w.User, fmt.Sprintf("holds %v, the device is connected to %s", ev.Status, d.Node.ID))
			}
		}
	}
}

// checkRoutes asks via for the route of each device: gone ones must have
// none (else a ghost), the others their node.
func (e *Env) checkRoutes(ctx context.Context, r *Round, via *Node, gone, stayed []*Device) {
	for _, d := range gone {
		nodes, err := via.Route(ctx, d.User)
		if err != nil {
			r.find("unknown_route", d.User, "", err.Error())
		} else if len(nodes) > 0 {
			r.find("ghost", d.User, "", fmt.Sprintf("route still %v", nodes))
		}
	}
	for _, d := range stayed {
		nodes, err := via.Route(ctx, d.User)
		if err != nil {
			r.find("unknown_route", d.User, "", err.Error())
		} else if !slices.Contains(nodes, d.Node.ID) {
			r.find("lost_route", d.User, "", fmt.Sprintf("route %v, connected to %s", nodes, d.Node.ID))
		}
	}
}

func (e *Env) fixed(name string) func(*Device) (string, float64) {
	return func(*Device) (string, float64) { return name, e.Bounds[name+"_ms"] }
}

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

func runClose(ctx context.Context, e *Env, r *Round) error {
	victim := e.Cluster.Nodes[r.Index%len(e.Cluster.Nodes)]
	ds := e.devicesOn(victim)
	r.Victim, r.Fault = victim.ID, fmt.Sprintf("%d devices on %s close", len(ds), victim.ID)
	t0 := time.Now()
	for _, d := range ds {
		d.Close()
	}
	e.awaitOffline(r, e.watchersBut(victim), ds, func(*Device) time.Time { return t0 }, e.fixed("graceful_close"),
		t0.Add(ms(e.Bounds["graceful_close_ms"])+e.Slack))
	e.checkStayed(r, e.Fleet.Watchers, e.othersThan(ds), t0)
	e.checkRoutes(ctx, r, victim, ds, e.othersThan(ds))
	e.checkFinal(r, e.Fleet.Watchers, ds, e.othersThan(ds))
	return nil
}

func runHalfOpen(ctx context.Context, e *Env, r *Round) error {
	victim := e.Cluster.Nodes[r.Index%len(e.Cluster.Nodes)]
	ds := e.devicesOn(victim)
	r.Victim, r.Fault = victim.ID, fmt.Sprintf("%d devices on %s go silent", len(ds), victim.ID)
	last := map[*Device]time.Time{}
	t0 := time.Now()
	for _, d := range ds {
		last[d] = d.Silence()
	}
	e.awaitOffline(r, e.watchersBut(victim), ds, func(d *Device) time.Time { return last[d] }, e.fixed("half_open"),
		t0.Add(ms(e.Bounds["half_open_ms"])+e.Slack))
	e.checkStayed(r, e.Fleet.Watchers, e.othersThan(ds), t0)
	e.checkRoutes(ctx, r, victim, ds, e.othersThan(ds))
	e.checkFinal(r, e.watchersBut(victim), ds, e.othersThan(ds))
	return nil
}

// crashBound: a device whose view or lease lived on a dead node has the
// owner crash bound (a crash that also takes the device's lease or view,
// docs/bounds.md); any other the gateway crash bound.
func (e *Env) crashBound(o owners, victims ...*Node) func(*Device) (string, float64) {
	return func(d *Device) (string, float64) {
		if o.lost(d, victims...) {
			return "owner_crash", e.Bounds["owner_crash_ms"]
		}
		return "gateway_crash", e.Bounds["gateway_crash_ms"]
	}
}

func (e *Env) survivor(victim *Node) *Node {
	for _, n := range e.Cluster.Nodes {
		if n != victim && n.Alive() {
			return n
		}
	}
	return nil
}

func runCrash(ctx context.Context, e *Env, r *Round) error {
	victim := e.Cluster.Nodes[r.Index%len(e.Cluster.Nodes)]
	owners, err := e.owners(ctx, e.survivor(victim))
	if err != nil {
		return err
	}
	ds := e.devicesOn(victim)
	r.Victim, r.Fault = victim.ID, fmt.Sprintf("kill -9 %s (%d devices)", victim.ID, len(ds))
	t0 := time.Now()
	victim.Kill()
	deadline := t0.Add(ms(max(e.Bounds["gateway_crash_ms"], e.Bounds["owner_crash_ms"])) + e.Slack)
	e.awaitOffline(r, e.watchersBut(victim), ds, func(*Device) time.Time { return t0 }, e.crashBound(owners, victim), deadline)
	// Devices elsewhere whose view or lease moved: nothing but online.
	time.Sleep(time.Until(deadline))
	e.checkStayed(r, e.watchersBut(victim), e.othersThan(ds), t0)
	e.checkRoutes(ctx, r, e.survivor(victim), ds, e.othersThan(ds))
	e.checkFinal(r, e.watchersBut(victim), ds, e.othersThan(ds))
	return nil
}

func runPause(ctx context.Context, e *Env, r *Round) error {
	victim := e.Cluster.Nodes[r.Index%len(e.Cluster.Nodes)]
	via := e.survivor(victim)
	owners, err := e.owners(ctx, via)
	if err != nil {
		return err
	}
	ds := e.devicesOn(victim)
	r.Victim, r.Fault = victim.ID, fmt.Sprintf("SIGSTOP %s (%d devices) until declared dead, then SIGCONT", victim.ID, len(ds))
	t0 := time.Now()
	if err := victim.Pause(); err != nil {
		return err
	}
	deadline := t0.Add(ms(max(e.Bounds["gateway_crash_ms"], e.Bounds["owner_crash_ms"])) + e.Slack)
	e.awaitOffline(r, e.watchersBut(victim), ds, func(*Device) time.Time { return t0 }, e.crashBound(owners, victim), deadline)
	awaitDeclaredDead(ctx, r, via, victim, deadline)
	time.Sleep(time.Until(deadline))
	e.checkStayed(r, e.watchersBut(victim), e.othersThan(ds), t0)
	if err := victim.Resume(); err != nil {
		return err
	}
	resumed := time.Now()
	checkFenced(r, victim, ds, resumed)
	if !e.awaitRejoin(ctx, r, victim) {
		return nil
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%s ready again %.1f s after SIGCONT", victim.ID, time.Since(resumed).Seconds()))
	// Its rejoining moved identities again: views activated since answer
	// unknown (503) until settle.
	time.Sleep(ms(e.Timing["settle_ms"]))
	e.checkRoutes(ctx, r, via, ds, e.othersThan(ds))
	e.checkFinal(r, e.watchersBut(victim), ds, e.othersThan(ds))
	e.checkAfterRejoin(r, victim, ds)
	return nil
}

// awaitDeclaredDead waits until via declares victim dead, or records that
// it did not by deadline.
func awaitDeclaredDead(ctx context.Context, r *Round, via, victim *Node, deadline time.Time) {
	for time.Now().Before(deadline) {
		ms, _ := via.Members(ctx)
		if slices.ContainsFunc(ms, func(m Member) bool { return m.ID == victim.ID && m.State == "dead" }) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.find("not_declared_dead", "", via.ID, fmt.Sprintf("%s still not dead at %s within the bound", victim.ID, via.ID))
}

// checkFenced: the resumed victim fences (its devices get 1001) and
// restarts as a new member.
func checkFenced(r *Round, victim *Node, ds []*Device, resumed time.Time) {
	for _, d := range ds {
		for time.Since(resumed) < 10*time.Second && d.CloseCode() == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if code := d.CloseCode(); code != int(messages.CloseGoingAway) {
			r.find("not_fenced", d.User, "", fmt.Sprintf("connection to the resumed %s closed with %d, want %d", victim.ID, code, messages.CloseGoingAway))
		}
	}
}

// checkAfterRejoin: subscriptions still work after the victim rejoined,
// wherever views moved: one device of each other node leaves.
func (e *Env) checkAfterRejoin(r *Round, victim *Node, ds []*Device) {
	ws := e.watchersBut(victim)
	var gone []*Device
	for _, n := range e.Cluster.Nodes {
		if dn := e.devicesOn(n); n != victim && len(dn) > 0 {
			gone = append(gone, dn[0])
		}
	}
	t1 := time.Now()
	for _, d := range gone {
		d.Close()
	}
	e.awaitOffline(r, ws, gone, func(*Device) time.Time { return t1 }, e.fixed("graceful_close"),
		t1.Add(ms(e.Bounds["graceful_close_ms"])+e.Slack))
	stayed := e.othersThan(append(slices.Clone(ds), gone...))
	e.checkStayed(r, ws, stayed, t1)
	e.checkFinal(r, ws, append(slices.Clone(ds), gone...), stayed)
}

func runJoin(ctx context.Context, e *Env, r *Round) error {
	t0 := time.Now()
	n, err := e.Cluster.AddNode(ctx)
	if err != nil {
		return err
	}
	r.Victim, r.Fault = n.ID, "start "+n.ID+" joining the cluster"
	// From its readiness (its join was done before): every member sees
	// every other alive within a join's convergence for the new size.
	e.awaitConvergence(ctx, r, "join_convergence", time.Now(), cluster.Convergence(e.Cluster.preset(), len(e.Cluster.Nodes)))
	// Through the re-registers and the settle window, and as long again.
	time.Sleep(2 * ms(e.Timing["settle_ms"]))
	e.checkStayed(r, e.Fleet.Watchers, e.Fleet.Devices, t0)
	// Departures after the join still reach every watcher: one device per
	// original node.
	gone := e.closeOnePerNode(r, e.Fleet.Watchers)
	e.checkRoutes(ctx, r, n, gone, e.othersThan(gone))
	e.checkFinal(r, e.Fleet.Watchers, gone, e.othersThan(gone))
	return nil
}

func (e *Env) othersThan(ds []*Device) []*Device {
	var out []*Device
	for _, d := range e.Fleet.Devices {
		if !slices.Contains(ds, d) {
			out = append(out, d)
		}
	}
	return out
}

// setup starts a cluster of nodes nodes in dir with devices devices spread
// over them and one watcher per node subscribed to every device's user,
// and waits until every watcher sees every device online.
func setup(ctx context.Context, o Options, dir string) (*Env, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	nodes, devices := o.Nodes, o.Devices
	c := &Cluster{Bin: o.Bin, Dir: dir, Secret: "chaos", Isolate: strings.HasPrefix(o.Scenario, "partition") || o.Scenario == "soak" && os.Geteuid() == 0}
	if o.Backend == "docker" {
		c.Docker = &Docker{Image: o.Image}
	}
	if strings.HasSuffix(o.Scenario, "-lease") {
		c.Args = append(c.Args, "--split-brain", "lease")
	}
	c.Args = append(c.Args, o.Args...)
	e := &Env{Cluster: c, Fleet: &Fleet{Secret: c.Secret}, Slack: 2 * time.Second, Duration: o.Duration, Faults: o.Faults, say: o.progress,
		groups: o.groups, kills: o.Kills, holdBack: o.HoldBack}
	if strings.HasPrefix(o.Scenario, "partition-2-2-1") {
		e.groups = []int{2, 2, 1}
	}
	if o.Scenario == "churn" {
		return e, e.setupChurn(ctx, o)
	}
	if o.Load > 0 {
		c.Preset, c.Args = o.LoadTiming, append(c.Args, LoadTiming(o.LoadTiming)...)
		e.Slack = LoadSlack
	}
	if isStoreScenario(o.Scenario) {
		if err := e.startStore(dir, o.Scenario); err != nil {
			return nil, err
		}
	}
	if err := c.Start(ctx, nodes); err != nil {
		c.Stop()
		e.stopStore()
		return nil, err
	}
	if err := e.withLoad(ctx, o, dir); err != nil {
		c.Stop()
		e.stopStore()
		return nil, err
	}
	if err := e.start(ctx, devices); err != nil {
		c.Stop()
		e.stopStore()
		return nil, err
	}
	return e, nil
}

// start reads the bounds, connects devices spread over the nodes and one
// watcher per node subscribed to every device's user, and waits until
// every watcher sees every device online.
func (e *Env) start(ctx context.Context, devices int) error {
	if err := e.readBounds(ctx, e.Cluster.Nodes[0]); err != nil {
		return err
	}
	e.Fleet.Heartbeat = ms(e.Timing["heartbeat_ms"] * 0.8) // within the client's jitter
	if err := e.connect(ctx, devices); err != nil {
		return err
	}
	// The bounds are for a settled cluster: a view activated within settle
	// of a membership change holds a departure until then (docs/bounds.md).
	time.Sleep(ms(e.Timing["settle_ms"]))
	return e.awaitOnline(time.Now().Add(max(15*time.Second, 2*e.Slack))) // under --load: 30 s
}

// readBounds reads n's bounds and timings (milliseconds).
func (e *Env) readBounds(ctx context.Context, n *Node) error {
	b, err := n.Bounds(ctx)
	if err != nil {
		return err
	}
	e.Bounds, e.Timing = millis(b)
	return nil
}

// connect connects the devices, spread over the nodes, each with a policy
// letting every watcher see it, and one watcher per node.
func (e *Env) connect(ctx context.Context, devices int) error {
	c := e.Cluster
	var targets, watchers []string
	for _, n := range c.Nodes {
		watchers = append(watchers, "watch-"+n.ID)
	}
	policy := `{"granularity":"exact","contacts":["` + joinQuoted(watchers) + `"]}`
	for i := range devices {
		d := &Device{User: fmt.Sprintf("d%03d", i), Node: c.Nodes[i%len(c.Nodes)]}
		if err := c.Nodes[0].PutPolicy(ctx, d.User, policy); err != nil {
			return err
		}
		if err := e.Fleet.Connect(ctx, d); err != nil {
			return err
		}
		e.Fleet.Devices = append(e.Fleet.Devices, d)
		targets = append(targets, d.User)
	}
	for _, n := range c.Nodes {
		w := &Watcher{User: "watch-" + n.ID, Node: n}
		if err := e.Fleet.Watch(ctx, w, targets); err != nil {
			return err
		}
		e.Fleet.Watchers = append(e.Fleet.Watchers, w)
	}
	return nil
}

// awaitOnline waits until every watcher sees every device online.
func (e *Env) awaitOnline(deadline time.Time) error {
	for _, w := range e.Fleet.Watchers {
		for _, d := range e.Fleet.Devices {
			for {
				if ev, ok := w.Last(d.User); ok && ev.Status == messages.Status_online {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("chaos: %s does not see %s online", w.User, d.User)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	return nil
}

func joinQuoted(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += `","`
		}
		out += s
	}
	return out
}

// awaitRejoin waits until victim is ready again and the cluster has
// converged with it; false (and a no_rejoin finding) if it did not.
func (e *Env) awaitRejoin(ctx context.Context, r *Round, victim *Node) bool {
	err := victim.WaitReady(ctx, 30*time.Second)
	if err == nil {
		err = e.Cluster.Converged(ctx, e.Cluster.Nodes...)
	}
	if err != nil {
		r.find("no_rejoin", "", "", err.Error())
		return false
	}
	return true
}

// closeOnePerNode closes one device of each node's and records the offline
// every watcher of ws gets against the graceful-close bound; it answers the
// devices it closed.
func (e *Env) closeOnePerNode(r *Round, ws []*Watcher) []*Device {
	var gone []*Device
	for _, nd := range e.Cluster.Nodes {
		if ds := e.devicesOn(nd); len(ds) > 0 {
			gone = append(gone, ds[0])
		}
	}
	t1 := time.Now()
	for _, d := range gone {
		d.Close()
	}
	e.awaitOffline(r, ws, gone, func(*Device) time.Time { return t1 }, e.fixed("graceful_close"),
		t1.Add(ms(e.Bounds["graceful_close_ms"])+e.Slack))
	return gone
}
