package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/cluster"
)

// The split-brain resolver under crashes (docs/bounds.md "Availability"):
// kill-two kills the two youngest nodes one after the other, a stable period
// apart (kill-seq: --kills of them): after each stable period the quorum
// base holds only the living, so the rest serve on, down to the oldest
// winning a 1-of-2 tie. kill-two-at-once kills them together: of three,
// with the majority rule, the survivor cannot tell that from a partition
// and fences, waiting for a peer or an operator; of four or more the rest
// hold a majority (or half with the oldest) and serve on.

// killAndAwait kills victim and waits until the watchers on via's side
// hear every one of its devices offline within its bound.
func (e *Env) killAndAwait(ctx context.Context, r *Round, via, victim *Node, ws []*Watcher) ([]*Device, time.Time, error) {
	owners, err := e.owners(ctx, via)
	if err != nil {
		return nil, time.Time{}, err
	}
	ds := e.devicesOn(victim)
	t0 := time.Now()
	victim.Kill()
	deadline := t0.Add(ms(max(e.Bounds["gateway_crash_ms"], e.Bounds["owner_crash_ms"])) + e.Slack)
	e.awaitOffline(r, ws, ds, func(*Device) time.Time { return t0 }, e.crashBound(owners, victim), deadline)
	return ds, deadline, nil
}

// stablePeriod waits until via declared victim dead, then for twice the
// failure detection of /api/bounds (for 100 members: longer than the
// resolver's stable period for a few).
func (e *Env) stablePeriod(ctx context.Context, r *Round, via, victim *Node) {
	deadline := time.Now().Add(ms(e.Timing["failure_detection_ms"]) + e.Slack)
	for time.Now().Before(deadline) {
		m, _ := via.Members(ctx)
		if slices.ContainsFunc(m, func(m Member) bool { return m.ID == victim.ID && m.State == "dead" }) {
			time.Sleep(2 * ms(e.Timing["failure_detection_ms"]))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.find("not_declared_dead", "", via.ID, victim.ID+" still not dead within the failure detection")
}

func runKillTwo(ctx context.Context, e *Env, r *Round) error { return e.killSeq(ctx, r, 2) }

func runKillSeq(ctx context.Context, e *Env, r *Round) error { return e.killSeq(ctx, r, e.kills) }

// killSeq kills the k youngest nodes, the youngest first, each once the
// one before was declared dead and a stable period passed; the others
// serve on, and their watchers hear each victim's devices offline within
// the crash bounds.
func (e *Env) killSeq(ctx context.Context, r *Round, k int) error {
	n := e.Cluster.Nodes
	if k < 1 || k >= len(n) {
		return fmt.Errorf("chaos: killing %d of %d nodes one after another: from 1 to nodes - 1", k, len(n))
	}
	oldest, victims := n[0], slices.Clone(n[len(n)-k:])
	slices.Reverse(victims)
	var ids []string
	for _, v := range victims {
		ids = append(ids, v.ID)
	}
	r.Victim, r.Fault = strings.Join(ids, ","), "kill -9 "+strings.Join(ids, ", a stable period, kill -9 ")
	t0 := time.Now()
	var gone []*Device
	var deadline time.Time
	for i, v := range victims {
		ds, d, err := e.killAndAwait(ctx, r, oldest, v, e.watchersOf(e.aliveBut(v)))
		if err != nil {
			return err
		}
		gone, deadline = append(gone, ds...), d
		if i < len(victims)-1 {
			e.stablePeriod(ctx, r, oldest, v)
		}
	}
	time.Sleep(time.Until(deadline))
	e.checkSurvivors(ctx, r, e.aliveBut(nil), gone, t0)
	return nil
}

// aliveBut is the nodes still running, but not n.
func (e *Env) aliveBut(n *Node) []*Node {
	var out []*Node
	for _, o := range e.Cluster.Nodes {
		if o != n && o.Alive() {
			out = append(out, o)
		}
	}
	return out
}

// watchersOf are the watchers connected to nodes.
func (e *Env) watchersOf(nodes []*Node) []*Watcher {
	var out []*Watcher
	for _, n := range nodes {
		out = append(out, e.watcherOn(n))
	}
	return out
}

// checkSurvivors: checkSurvivor with the watchers of every survivor.
func (e *Env) checkSurvivors(ctx context.Context, r *Round, survivors []*Node, gone []*Device, t0 time.Time) {
	for _, s := range survivors[1:] {
		e.checkServing(ctx, r, s)
	}
	e.checkSurvivor(ctx, r, survivors[0], e.watchersOf(survivors), gone, t0)
}

// checkSurvivor: the survivor serves (none of its devices closed), its
// watchers ws saw no false offline since t0, the routes and every final
// state are the truth for the devices gone with the others and those that
// stayed.
func (e *Env) checkSurvivor(ctx context.Context, r *Round, survivor *Node, ws []*Watcher, gone []*Device, t0 time.Time) {
	stayed := e.othersThan(gone)
	e.checkServing(ctx, r, survivor)
	e.checkStayed(r, ws, stayed, t0)
	e.checkRoutes(ctx, r, survivor, gone, stayed)
	e.checkFinal(r, ws, gone, stayed)
}

func runKillTwoAtOnce(ctx context.Context, e *Env, r *Round) error {
	n := e.Cluster.Nodes
	if len(n) > 3 {
		return e.killTogether(ctx, r, n[len(n)-2:], false)
	}
	oldest, youngest, middle := n[0], n[2], n[1]
	r.Victim, r.Fault = youngest.ID+","+middle.ID, fmt.Sprintf("kill -9 %s and %s together", youngest.ID, middle.ID)
	youngest.Kill()
	middle.Kill()
	t0 := time.Now()
	// The documented outcome (majority): the survivor fences once it
	// declared both dead, closes its devices with 1001 and waits, fenced,
	// for a peer or an operator.
	bound := e.fenceBound(1)
	deadline := t0.Add(ms(bound) + e.Slack)
	for _, d := range e.devicesOn(oldest) {
		for time.Now().Before(deadline) && d.CloseCode() == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if code := d.CloseCode(); code != 1001 {
			r.find("not_fenced", d.User, "", fmt.Sprintf("connection to the survivor %s: close %d, want 1001", oldest.ID, code))
			continue
		}
		r.Latencies = append(r.Latencies, Latency{Device: d.User, Bound: "fence", Ms: float64(time.Since(t0).Microseconds()) / 1000, BoundMs: bound})
	}
	var f struct {
		Fenced bool `json:"fenced"`
	}
	for time.Now().Before(deadline.Add(e.Slack)) && !f.Fenced {
		_, _ = oldest.get(ctx, "/api/fence", &f)
		time.Sleep(20 * time.Millisecond)
	}
	if !f.Fenced {
		r.find("not_fenced", "", "", oldest.ID+" does not report itself fenced (GET /api/fence)")
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%s fenced %.1f s after the two crashes", oldest.ID, time.Since(t0).Seconds()))
	return nil
}

// watcherOn is the watcher connected to n.
func (e *Env) watcherOn(n *Node) *Watcher {
	for _, w := range e.Fleet.Watchers {
		if w.Node == n {
			return w
		}
	}
	return nil
}

// checkServing: n is ready and none of its devices was closed (it did not
// fence).
func (e *Env) checkServing(ctx context.Context, r *Round, n *Node) {
	if code, err := n.get(ctx, "/readyz", nil); code != 200 {
		r.find("not_serving", "", "", fmt.Sprintf("%s /readyz: %d %v", n.ID, code, err))
	}
	for _, d := range e.devicesOn(n) {
		if code := d.CloseCode(); code != 0 {
			r.find("not_serving", d.User, "", fmt.Sprintf("its connection to %s closed with %d", n.ID, code))
		}
	}
}

// runKillTwoAtOnceLease: the same two crashes on nodes started with
// --split-brain lease, and the youngest survives (the majority rule's tie
// would go to the oldest): it takes the lease in the shared SQLite file and
// serves on: none of its devices closed, the others' reported offline
// within the crash bounds, every device's final state the truth.
func runKillTwoAtOnceLease(ctx context.Context, e *Env, r *Round) error {
	n := e.Cluster.Nodes
	if len(n) > 3 {
		return e.killTogether(ctx, r, n[:2], true)
	}
	oldest, youngest, middle := n[0], n[2], n[1]
	owners, err := e.owners(ctx, youngest)
	if err != nil {
		return err
	}
	gone := append(e.devicesOn(oldest), e.devicesOn(middle)...)
	r.Victim, r.Fault = oldest.ID+","+middle.ID, fmt.Sprintf("kill -9 %s and %s together (--split-brain lease)", oldest.ID, middle.ID)
	t0 := time.Now()
	oldest.Kill()
	middle.Kill()
	ws := []*Watcher{e.watcherOn(youngest)}
	deadline := t0.Add(ms(max(e.Bounds["gateway_crash_ms"], e.Bounds["owner_crash_ms"])) + e.Slack)
	e.awaitOffline(r, ws, gone, func(*Device) time.Time { return t0 }, e.leaseBound(e.crashBound(owners, oldest, middle)), deadline)
	time.Sleep(time.Until(deadline))
	e.checkSurvivor(ctx, r, youngest, ws, gone, t0)
	return nil
}

// leaseBound is bound for a survivor at or below half of its base under
// the lease strategy: it serves, and gives verdicts, only once it holds
// the lease (the doubt after a death verdict, docs/architecture.md "The
// cluster", 7). Its fence watch notes the lost majority at its next tick,
// asks for the lease at the first tick a propagation later
// (cluster.Arbiter.Delay: a majority, if any, takes it first), and a
// verdict held meanwhile asks again within actors.DoubtHold of that doubt.
// A gateway crash's offline there may take that much longer (and the
// store's round trip, some milliseconds here): bound gateway_crash_lease.
func (e *Env) leaseBound(bound func(*Device) (string, float64)) func(*Device) (string, float64) {
	wait := cluster.Propagation(e.Cluster.preset()) + 2*cluster.FenceTick
	extra := float64((wait + actors.DoubtHold(wait)).Milliseconds())
	return func(d *Device) (string, float64) {
		name, b := bound(d)
		if name == "gateway_crash" {
			return "gateway_crash_lease", b + extra
		}
		return name, b
	}
}

// killTogether kills victims at once in a cluster of four or more: the
// rest serve on, by the majority rule or, with the lease strategy and the
// rest at or below half of the base, on the lease (gateway_crash_lease);
// their watchers hear the victims' devices offline within the crash bounds.
func (e *Env) killTogether(ctx context.Context, r *Round, victims []*Node, lease bool) error {
	var rest []*Node
	for _, n := range e.Cluster.Nodes {
		if !slices.Contains(victims, n) {
			rest = append(rest, n)
		}
	}
	owners, err := e.owners(ctx, rest[0])
	if err != nil {
		return err
	}
	var gone []*Device
	var ids []string
	for _, v := range victims {
		gone, ids = append(gone, e.devicesOn(v)...), append(ids, v.ID)
	}
	r.Victim, r.Fault = strings.Join(ids, ","), fmt.Sprintf("kill -9 %s together; %d nodes serve on", strings.Join(ids, " and "), len(rest))
	t0 := time.Now()
	for _, v := range victims {
		v.Kill()
	}
	bound := e.crashBound(owners, victims...)
	if lease && 2*len(rest) <= len(e.Cluster.Nodes) {
		bound = e.leaseBound(bound)
	}
	deadline := t0.Add(ms(max(e.Bounds["gateway_crash_ms"], e.Bounds["owner_crash_ms"])) + e.Slack)
	e.awaitOffline(r, e.watchersOf(rest), gone, func(*Device) time.Time { return t0 }, bound, deadline)
	time.Sleep(time.Until(deadline))
	e.checkSurvivors(ctx, r, rest, gone, t0)
	return nil
}
