package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// soak injects, for Options.Duration, one fault after another drawn from a
// seeded source: kill -9 and restart, SIGSTOP past death and SIGCONT, a
// 2+1 partition and its heal (as root), SIGTERM and restart. The devices
// and watchers are Go SDK sessions. After each fault: devices on nodes the
// fault did not touch never showed offline, versions never went back, and
// every watcher holds every device online again (recovery, against the
// owner-crash bound plus the time the hit node takes to come back).

type fault struct {
	name   string
	inject func(ctx context.Context, e *Env, victim *Node) error
}

// SoakFaults names soak's faults (Options.Faults picks among them).
func SoakFaults() []string { return names(soakFaults) }

// drawFrom is the faults of soakFaults named in names (all if none).
func drawFrom(names []string) ([]fault, error) {
	if len(names) == 0 {
		return soakFaults, nil
	}
	var out []fault
	for _, n := range names {
		i := slices.IndexFunc(soakFaults, func(f fault) bool { return f.name == n })
		if i < 0 {
			return nil, fmt.Errorf("chaos: no soak fault %q (%q)", n, SoakFaults())
		}
		out = append(out, soakFaults[i])
	}
	return out, nil
}

var soakFaults = []fault{
	{"kill -9, restart", func(ctx context.Context, e *Env, n *Node) error {
		n.Kill()
		time.Sleep(ms(e.Timing["failure_detection_ms"]))
		return e.Cluster.Restart(ctx, n)
	}},
	{"SIGSTOP past death, SIGCONT", func(ctx context.Context, e *Env, n *Node) error {
		if err := n.Pause(); err != nil {
			return err
		}
		time.Sleep(ms(e.Timing["failure_detection_ms"]) + time.Second)
		if err := n.Resume(); err != nil {
			return err
		}
		return n.WaitReady(ctx, 30*time.Second)
	}},
	{"SIGTERM, restart", func(ctx context.Context, e *Env, n *Node) error { return e.Cluster.Restart(ctx, n) }},
	{"partition 2+1, heal", func(ctx context.Context, e *Env, n *Node) error {
		if e.Cluster.fw == nil {
			return e.Cluster.Restart(ctx, n) // not root: a restart instead
		}
		var others []*Node
		for _, o := range e.Cluster.Nodes {
			if o != n {
				others = append(others, o)
			}
		}
		if err := e.Cluster.fw.isolate(n, others); err != nil {
			return err
		}
		time.Sleep(ms(e.Timing["failure_detection_ms"]) + time.Second)
		if err := e.Cluster.heal(); err != nil {
			return err
		}
		return n.WaitReady(ctx, 30*time.Second)
	}},
}

func runSoak(ctx context.Context, e *Env, r *Round) error {
	faults, err := drawFrom(e.Faults)
	if err != nil {
		return err
	}
	f, err := e.startSDKFleet(ctx)
	if err != nil {
		return err
	}
	seed := uint64(time.Now().UnixNano())
	rnd := rand.New(rand.NewPCG(seed, uint64(r.Index)))
	r.Fault = fmt.Sprintf("random faults for %v (seed %d) among %q", e.Duration, seed, names(faults))
	end := time.Now().Add(e.Duration)
	for i := 0; time.Now().Before(end); i++ {
		time.Sleep(ms(e.Timing["settle_ms"]))
		victim := e.Cluster.Nodes[rnd.IntN(len(e.Cluster.Nodes))]
		ft := faults[rnd.IntN(len(faults))]
		hit := map[string]bool{}
		for j, d := range f.devices {
			hit[f.users[j]] = d.Hello().GetNode() == victim.ID
		}
		t0 := time.Now()
		if err := ft.inject(ctx, e, victim); err != nil {
			return fmt.Errorf("chaos: soak fault %d (%s on %s): %w", i, ft.name, victim.ID, err)
		}
		if err := e.Cluster.Converged(ctx, e.Cluster.Nodes...); err != nil {
			r.find("no_rejoin", "", "", err.Error())
			return nil
		}
		bound := ms(e.Bounds["owner_crash_ms"]) + time.Since(t0) // the fault's own length
		if err := allOnline(f.watchers, f.users, bound+e.Slack); err != nil {
			r.find("wrong_final", "", "", fmt.Sprintf("after %s on %s: %v", ft.name, victim.ID, err))
		}
		r.Latencies = append(r.Latencies, Latency{Device: ft.name, Watcher: victim.ID, Bound: "soak_recovered", Ms: float64(time.Since(t0).Microseconds()) / 1000, BoundMs: float64(bound.Microseconds()) / 1000})
		checkWatchers(r, f.watchers, t0, func(u string) bool { return !hit[u] }, ft.name+" on "+victim.ID)
	}
	return nil
}

func names(fs []fault) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.name)
	}
	return out
}
