package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A partition of five nodes into 2+2+1 (process backend, root: the
// firewall of partition.go). No side reaches more than half of the five,
// and five is odd, so no side ties (docs/operations.md, "Split brain"):
//
//   - majority (the default): every side fences within the failure
//     detection (cluster.Decide: 2 or 1 of 5) and takes no device while
//     the partition lasts. After the heal the fenced nodes' new
//     incarnations reach each other, the resolver lets them serve once a
//     majority of the five is alive again (cluster.Rejoin), and they form
//     one cluster;
//   - lease (--split-brain lease): the side whose node takes the store's
//     lease first serves on; the two others find it held by a member they
//     do not reach, renewed since, and fence; their devices reconnect to
//     the serving side.
//
// Either way, after the heal: one cluster of five, and every watcher,
// reconnected where its node fenced, holds the truth.

// The same holds for any cut into named sides (--groups): 4+5 and 3+3+3
// of nine. By the majority rule the side holding more than half (5 of
// 4+5; none of 3+3+3) serves and the others fence; with the lease the side
// that takes it serves (a majority, if any, asks first: the 5), the
// others fence. Sides are cut from the nodes rotated by the round, so
// that each round puts other nodes together.

func runSplit(ctx context.Context, e *Env, r *Round) error {
	if e.Cluster.fw == nil {
		return fmt.Errorf("chaos: a partition needs the process backend run as root (iptables)")
	}
	ss := cut(e.Cluster.Nodes, e.groups, r.Index)
	r.Victim, r.Fault = "all", "partition "+sideNames(ss)
	lease := e.leaseStrategy()
	t0 := time.Now()
	if err := e.Cluster.fw.split(ss); err != nil {
		return err
	}
	if e.holdBack > 0 {
		if err := e.holdBackAllBut(ctx, r, ss); err != nil {
			return err
		}
	}
	serving := e.awaitSides(ctx, r, ss, lease, t0)
	if serving != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("%s serve%s on", sideNames([][]*Node{serving}), map[bool]string{true: "s", false: ""}[len(serving) == 1]))
		e.moveTo(ctx, r, serving, t0)
	}
	e.awaitIncarnations(ctx, e.fencedNodes(serving))
	if err := e.Cluster.heal(); err != nil {
		return err
	}
	healed := time.Now()
	e.awaitHealConvergence(ctx, r, t0, healed)
	if err := e.rejoinAll(ctx, r); err != nil {
		return err
	}
	r.Notes = append(r.Notes, fmt.Sprintf("one cluster of %d again %.1f s after the heal", len(e.Cluster.Nodes), time.Since(healed).Seconds()))
	return e.afterHeal(ctx, r, serving)
}

// holdBackAllBut freezes every node not on the last side of ss for
// Options.HoldBack, so that side takes the split-brain lease first; the
// round's notes say which side served. Only with no side holding a
// majority (it takes the lease first by design); Options.prepare let only
// the lease's scenarios through. The
// frozen nodes fence on the pause when they run again (cluster.FencePaused), not
// on finding the lease held, and their fence latencies include the
// freeze.
func (e *Env) holdBackAllBut(ctx context.Context, r *Round, ss [][]*Node) error {
	if major := servingSide(e.Cluster.Nodes, ss); major != nil {
		return fmt.Errorf("chaos: --hold-back: %s holds a majority, which takes the lease first by design", sideNames([][]*Node{major}))
	}
	last := ss[len(ss)-1]
	var held []*Node
	var err error
	for _, n := range e.Cluster.Nodes {
		if !slices.Contains(last, n) {
			if err = n.Pause(); err != nil {
				break
			}
			held = append(held, n)
		}
	}
	if err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(e.holdBack):
		}
	}
	for _, n := range held { // those frozen, whatever failed
		err = errors.Join(err, n.Resume())
	}
	if err != nil {
		return err
	}
	r.Notes = append(r.Notes, fmt.Sprintf("all but %s frozen for %v from the cut", sideNames([][]*Node{last}), e.holdBack))
	return nil
}

func sideNames(ss [][]*Node) string {
	var out []string
	for _, s := range ss {
		var ids []string
		for _, n := range s {
			ids = append(ids, n.ID)
		}
		out = append(out, "{"+strings.Join(ids, ",")+"}")
	}
	return strings.Join(out, " ")
}

// awaitSides waits out the fence bound and answers the side still
// serving (nil: none). With the majority rule only the side holding more
// than half, if any, serves; with the lease exactly one side serves, the
// majority if there is one. The devices of every fenced node must be
// closed with 1001 within fenceBound for its side.
func (e *Env) awaitSides(ctx context.Context, r *Round, ss [][]*Node, lease bool, t0 time.Time) []*Node {
	fd, worst := e.Timing["failure_detection_ms"], 0.0
	for _, s := range ss {
		worst = max(worst, e.fenceBound(len(s)))
	}
	time.Sleep(time.Until(t0.Add(ms(fd) + e.Slack)))
	serving := e.servingSides(ctx, ss)
	major := servingSide(e.Cluster.Nodes, ss)
	want := 0
	if lease || major != nil {
		want = 1
	}
	if len(serving) != want { // the losers may still be deciding
		time.Sleep(time.Until(t0.Add(ms(worst) + e.Slack)))
		serving = e.servingSides(ctx, ss)
	}
	if len(serving) != want {
		r.find("split_brain", "", "", fmt.Sprintf("%d sides serve (%s), want %d", len(serving), sideNames(serving), want))
	} else if want == 1 && major != nil && !slices.Equal(serving[0], major) {
		r.find("wrong_side", "", "", fmt.Sprintf("%s serves, the majority %s does not", sideNames(serving), sideNames([][]*Node{major})))
	}
	var out []*Node
	if len(serving) == 1 {
		out = serving[0]
	}
	for _, s := range ss {
		for _, n := range s {
			if !slices.Contains(out, n) {
				e.awaitFence(r, n, e.devicesOn(n), t0, len(s))
			}
		}
	}
	return out
}

// fencedNodes are the nodes not on the serving side.
func (e *Env) fencedNodes(serving []*Node) []*Node {
	var out []*Node
	for _, n := range e.Cluster.Nodes {
		if !slices.Contains(serving, n) {
			out = append(out, n)
		}
	}
	return out
}

// servingSides are the sides of ss whose nodes are all ready.
func (e *Env) servingSides(ctx context.Context, ss [][]*Node) [][]*Node {
	var out [][]*Node
	for _, s := range ss {
		if !slices.ContainsFunc(s, func(n *Node) bool { code, _ := n.get(ctx, "/readyz", nil); return code != 200 }) {
			out = append(out, s)
		}
	}
	return out
}

// moveTo reconnects the devices of the fenced nodes to the serving side,
// as the SDK would, and checks that the serving side's watchers saw none
// of its own devices go offline.
func (e *Env) moveTo(ctx context.Context, r *Round, serving []*Node, t0 time.Time) {
	var moved []*Device
	for _, d := range e.Fleet.Devices {
		if !slices.Contains(serving, d.Node) {
			moved = append(moved, d)
		}
	}
	for i, d := range moved {
		d.Node = serving[i%len(serving)]
		if err := e.Fleet.Connect(ctx, d); err != nil {
			r.find("no_reconnect", d.User, "", err.Error())
		}
	}
	var ws []*Watcher
	for _, n := range serving {
		ws = append(ws, e.watcherOn(n))
	}
	e.checkStayed(r, ws, e.othersThan(moved), t0)
}

// rejoinAll waits until every node is ready in one cluster of all.
func (e *Env) rejoinAll(ctx context.Context, r *Round) error {
	for _, n := range e.Cluster.Nodes {
		if err := n.WaitReady(ctx, 40*time.Second); err != nil {
			r.find("no_rejoin", "", "", err.Error())
			return nil
		}
	}
	if err := e.Cluster.Converged(ctx, e.Cluster.Nodes...); err != nil {
		r.find("no_rejoin", "", "", err.Error())
	}
	return nil
}

// afterHeal reconnects every device and watcher whose node fenced (all
// but those of serving), lets the views settle, and checks that every
// watcher holds the truth (all online) and hears a departure on each node
// within the graceful bound.
func (e *Env) afterHeal(ctx context.Context, r *Round, serving []*Node) error {
	for _, d := range e.Fleet.Devices {
		if d.CloseCode() != 0 {
			if err := e.Fleet.Connect(ctx, d); err != nil {
				r.find("no_reconnect", d.User, "", err.Error())
			}
		}
	}
	var targets []string
	for _, d := range e.Fleet.Devices {
		targets = append(targets, d.User)
	}
	for i, w := range e.Fleet.Watchers {
		if slices.Contains(serving, w.Node) {
			continue
		}
		nw := &Watcher{User: w.User, Node: w.Node}
		if err := e.Fleet.Watch(ctx, nw, targets); err != nil {
			r.find("no_rejoin", "", w.User, err.Error())
			continue
		}
		e.Fleet.Watchers[i] = nw
	}
	time.Sleep(ms(e.Timing["settle_ms"]))
	if err := e.awaitOnline(time.Now().Add(10 * time.Second)); err != nil {
		r.find("wrong_final", "", "", err.Error())
	}
	e.checkFinal(r, e.Fleet.Watchers, nil, e.Fleet.Devices)
	gone := e.closeOnePerNode(r, e.Fleet.Watchers)
	e.checkFinal(r, e.Fleet.Watchers, gone, e.othersThan(gone))
	e.checkRoutes(ctx, r, e.Cluster.Nodes[0], gone, e.othersThan(gone))
	return nil
}
