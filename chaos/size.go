package chaos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/presence-im/presence/cluster"
)

// The cluster's size: every scenario whose fault makes sense at --nodes N
// runs at N (docs/bounds.md "The cluster's size"): kill-seq kills --kills
// nodes one after another past the stable period, --groups cuts a
// partition into named sides (4+5, 3+3+3), and the fence and convergence
// bounds are derived for N (cluster.FenceClose, cluster.Convergence).

// ParseGroups reads --groups: side sizes joined by '+', at least two, each
// at least 1 ("4+5", "3+3+3").
func ParseGroups(s string) ([]int, error) {
	parts := strings.Split(s, "+")
	if len(parts) < 2 {
		return nil, fmt.Errorf("chaos: --groups %q: at least two sides joined by +, e.g. 4+5", s)
	}
	var out []int
	for _, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("chaos: --groups %q: %q is not a side of at least one node", s, p)
		}
		out = append(out, n)
	}
	return out, nil
}

// groupsScenarios take --groups.
var groupsScenarios = []string{"partition", "partition-lease"}

// validSize checks --groups and --kills for the scenario and fills the
// node count --groups implies and the kills' default.
func (o *Options) validSize(sc Scenario) error {
	if o.Groups != "" {
		if !slices.Contains(groupsScenarios, sc.Name) {
			return fmt.Errorf("chaos: --groups runs with %s", strings.Join(groupsScenarios, ", "))
		}
		g, err := ParseGroups(o.Groups)
		if err != nil {
			return err
		}
		o.groups, o.Nodes = g, 0
		for _, n := range g {
			o.Nodes += n
		}
	}
	if sc.Name != "kill-seq" {
		if o.Kills != 0 {
			return fmt.Errorf("chaos: --kills runs with kill-seq")
		}
		return nil
	}
	if o.Kills == 0 {
		o.Kills = DefaultKills(o.Nodes)
	}
	if o.Kills < 1 || o.Kills >= o.Nodes {
		return fmt.Errorf("chaos: kill-seq: --kills %d of %d nodes: from 1 to nodes - 1 (one serves on)", o.Kills, o.Nodes)
	}
	return nil
}

// DefaultKills is kill-seq's default: three nodes from five on, else two.
func DefaultKills(nodes int) int {
	if nodes >= 5 {
		return 3
	}
	return 2
}

// rotate puts the round's node first, so that each round cuts other sides.
func rotate(nodes []*Node, round int) []*Node {
	k := round % len(nodes)
	return append(slices.Clone(nodes[k:]), nodes[:k]...)
}

// cut splits nodes into sides of the sizes groups, rotated by the round.
func cut(nodes []*Node, groups []int, round int) [][]*Node {
	o := rotate(nodes, round)
	var out [][]*Node
	for _, g := range groups {
		out, o = append(out, o[:g]), o[g:]
	}
	return out
}

// servingSide is the side that serves by the majority rule (more than
// half of the nodes, or half with the oldest, nodes[0]), or nil.
func servingSide(nodes []*Node, ss [][]*Node) []*Node {
	for _, s := range ss {
		if 2*len(s) > len(nodes) || 2*len(s) == len(nodes) && slices.Contains(s, nodes[0]) {
			return s
		}
	}
	return nil
}

// fenceBound (ms) is how long after a cut a node of a side of side members
// that must fence takes at most to close its last device: the side's
// decision for the cluster's size, its goodbyes and the drain spread
// (cluster.FenceClose; with --split-brain lease the store's lease as well).
func (e *Env) fenceBound(side int) float64 {
	d := cluster.FenceClose(e.Cluster.preset(), len(e.Cluster.Nodes), side, e.leaseStrategy(), DrainSpread)
	return float64(d.Milliseconds())
}

// converged reports whether every alive node of nodes sees every other
// alive.
func converged(ctx context.Context, nodes []*Node) bool {
	for _, n := range nodes {
		ms, err := n.Members(ctx)
		if err != nil {
			return false
		}
		for _, o := range nodes {
			if !slices.ContainsFunc(ms, func(m Member) bool { return m.ID == o.ID && m.State == "alive" }) {
				return false
			}
		}
	}
	return true
}

// awaitConvergence waits until every node sees every other alive and
// records how long after since that took, against bound (name: the
// report's join_convergence or heal_convergence); not_converged if it
// did not within bound and the slack.
func (e *Env) awaitConvergence(ctx context.Context, r *Round, name string, since time.Time, bound time.Duration) {
	deadline := since.Add(bound + e.Slack)
	for !converged(ctx, e.Cluster.Nodes) {
		if time.Now().After(deadline) {
			r.find("not_converged", "", "", fmt.Sprintf("not every node sees every other alive %v after the %s", bound+e.Slack, strings.TrimSuffix(name, "_convergence")))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.Latencies = append(r.Latencies, Latency{Device: "cluster", Bound: name, Ms: float64(time.Since(since).Microseconds()) / 1000, BoundMs: float64(bound.Milliseconds())})
}

// awaitHealConvergence: after a heal at healed of a cut made at t0, every
// node sees every other alive within the fenced incarnations' next try and
// a join's convergence (cluster.HealConvergence).
func (e *Env) awaitHealConvergence(ctx context.Context, r *Round, t0, healed time.Time) {
	e.awaitConvergence(ctx, r, "heal_convergence", healed, cluster.HealConvergence(e.Cluster.preset(), len(e.Cluster.Nodes), healed.Sub(t0)))
}

// awaitIncarnations waits, before a heal, until each fenced node of nodes
// runs its new incarnation (GET /api/fence answers fenced), so that the
// heal's convergence measures the rejoin and not a start-up.
func (e *Env) awaitIncarnations(ctx context.Context, nodes []*Node) {
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range nodes {
		for time.Now().Before(deadline) {
			var f struct {
				Fenced bool `json:"fenced"`
			}
			if code, _ := n.get(ctx, "/api/fence", &f); code == 200 && f.Fenced {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
