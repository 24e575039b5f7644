package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/presence-im/presence/bench"
)

// LoadTiming is what a node runs with under --load, on top of the preset
// of --load-timing: the fast heartbeat (300 ms) and renewal (600 ms) of
// 19,000 devices per node would be 190,000 heartbeats and 95,000 renewals
// a second on three nodes, past what two cores do, so those move to a 5 s
// heartbeat (stale 2.5 x, check 1 s, as make bench) and a 30 s renewal
// (TTL 2.5 x). With the fast preset gossip and debounce stay fast (a
// member is declared dead after about 1 s of silence, and a node that did
// not run for that long fences itself); with the seed preset (the
// production default: 49.5 s failure detection) the debounce is 1 s. The
// bounds checked are the nodes' own (GET /api/bounds) for this timing.
func LoadTiming(preset string) []string {
	t := []string{"--heartbeat", "5s", "--stale", "12.5s", "--check", "1s", "--renew", "30s", "--ttl", "75s",
		"--admit-rate", "1000000", "--admit-burst", "1000000"}
	if preset == "seed" {
		t = append(t, "--debounce", "1s")
	}
	return t
}

// LoadSlack is how long past a bound the harness waits under --load before
// calling an offline lost (2 s without): a late one is then measured, and
// reported over its bound, rather than only missing.
const LoadSlack = 15 * time.Second

// loadScenarios are those --load runs with: a fault on one node whose
// devices and load the harness can tell apart.
var loadScenarios = []string{"close", "gateway-crash", "pause"}

// BuildBench compiles cmd/bench (whose worker command holds the load)
// into dir.
func BuildBench(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "bench")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/presence-im/presence/cmd/bench").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("chaos: building bench: %w\n%s", err, out)
	}
	return bin, nil
}

// withLoad connects o.Load devices to every node from load processes,
// heartbeating, before the watched devices connect.
func (e *Env) withLoad(ctx context.Context, o Options, dir string) error {
	if o.Load <= 0 {
		return nil
	}
	if err := e.readBounds(ctx, e.Cluster.Nodes[0]); err != nil {
		return err
	}
	var urls []string
	for _, n := range e.Cluster.Nodes {
		urls = append(urls, "ws://"+n.Listen+"/ws")
	}
	t0 := time.Now()
	b, err := bench.StartBackground(bench.BackgroundOptions{Self: o.LoadBin, URLs: urls, PerNode: o.Load,
		Secret: e.Cluster.Secret, Interval: ms(e.Timing["heartbeat_ms"]), Dir: filepath.Join(dir, "load")})
	if err != nil {
		return err
	}
	e.load = b
	e.say("load: %d devices on each of %d nodes from %d processes in %.1f s", o.Load, len(urls), b.Processes(), time.Since(t0).Seconds())
	return nil
}

// loadBefore reads the load's counters as the fault begins.
func (e *Env) loadBefore() map[string]bench.LoadStats {
	if e.load == nil {
		return nil
	}
	st, _ := e.load.Stats()
	return st
}

// checkLoad: no background device on a node still alive lost its
// connection (what a false offline is to a device), and their heartbeats
// flowed through the round; the victim's were cut with it.
// cutsVictim: the fault takes the victim's connections (a kill, a pause
// it fences after), not only the watched devices' (close).
func (e *Env) checkLoad(r *Round, before map[string]bench.LoadStats, cutsVictim bool) {
	after, err := e.load.Stats()
	if err != nil {
		r.find("load", "", "", "reading the load processes: "+err.Error())
		return
	}
	var notes []string
	for _, n := range e.Cluster.Nodes {
		u := "ws://" + n.Listen + "/ws"
		a, b := after[u], before[u]
		cut := a.Unexpected - b.Unexpected
		notes = append(notes, fmt.Sprintf("%s: %d devices, %d heartbeats acked, %d cut (%s)", n.ID, a.Devices, a.Acks-b.Acks, cut, orNone(a.Codes)))
		if !n.Alive() || cutsVictim && slices.Contains(strings.Split(r.Victim, ","), n.ID) {
			continue
		}
		if cut > 0 {
			r.find("load_cut", "", "", fmt.Sprintf("%d background devices on %s, which stayed, lost their connection (codes %s)", cut, n.ID, a.Codes))
		}
		if a.Acks <= b.Acks {
			r.find("load_idle", "", "", fmt.Sprintf("no background heartbeat acked by %s during the round", n.ID))
		}
	}
	sort.Strings(notes)
	r.Notes = append(r.Notes, "load: "+strings.Join(notes, "; "))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// validLoad refuses --load where it does not fit (and forgets
// --load-timing without it).
func (o *Options) validLoad() error {
	if o.Load <= 0 {
		o.LoadTiming = ""
		return nil
	}
	if !slices.Contains(loadScenarios, o.Scenario) || o.Backend == "docker" {
		return fmt.Errorf("chaos: --load runs on the process backend, scenarios %s", strings.Join(loadScenarios, ", "))
	}
	if o.LoadTiming == "" {
		o.LoadTiming = "fast"
	}
	if o.LoadTiming != "fast" && o.LoadTiming != "seed" {
		return fmt.Errorf("chaos: --load-timing %q: fast or seed", o.LoadTiming)
	}
	return nil
}

// buildLoad builds cmd/bench for --load unless given.
func (o *Options) buildLoad(ctx context.Context) error {
	if o.Load <= 0 || o.LoadBin != "" {
		return nil
	}
	bin, err := BuildBench(ctx, o.Report)
	o.LoadBin = bin
	return err
}
