// Command chaos is the chaos harness (see package chaos):
//
//	chaos list
//	chaos run --scenario NAME --nodes N --devices D --report DIR [--rounds R] [--presenced BIN] [--backend process|docker] [--image IMG]
//	chaos run --scenario gateway-crash --load 19000 --report DIR     (background devices per node)
//	chaos run --scenario partition --groups 4+5 --report DIR         (sides of a partition; 9 nodes)
//	chaos run --scenario kill-seq --nodes 9 --kills 3 --report DIR
//	chaos run --scenario churn --users U --online N --stay D --idle D --report DIR
//	chaos margins DIR...   (what re-created views had left of their settle, from debug logs)
//
// It exits 0 only if every measured latency is within its bound and no
// false offline, ghost or lost event was seen; 1 otherwise; 2 on bad usage.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/presence-im/presence/chaos"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: chaos list | chaos run --scenario NAME --nodes N --devices D --report DIR [--rounds R]")
		return 2
	}
	switch args[0] {
	case "list":
		for _, s := range chaos.Scenarios {
			fmt.Fprintf(stdout, "%-14s %s\n", s.Name, s.About)
		}
		return 0
	case "margins":
		return margins(args[1:], stdout, stderr)
	case "run":
	default:
		fmt.Fprintf(stderr, "chaos: unknown command %q\n", args[0])
		return 2
	}
	o, ok := runFlags(args[1:], stderr)
	if !ok {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return runAll(ctx, o, stdout, stderr)
}

// margins prints, for each report directory of runs with --node-flags
// "--log-level debug", how long before their settle the re-created views
// heard a device come up (chaos.SettleMargins): n, min, 5th percentile and
// median.
func margins(dirs []string, stdout, stderr io.Writer) int {
	if len(dirs) == 0 {
		fmt.Fprintln(stderr, "usage: chaos margins DIR... (report directories of runs with --node-flags \"--log-level debug\")")
		return 2
	}
	for _, dir := range dirs {
		m, err := chaos.SettleMargins(dir)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if len(m) == 0 {
			fmt.Fprintf(stdout, "%s: no re-created view heard a device before its settle (debug logs?)\n", dir)
			continue
		}
		fmt.Fprintf(stdout, "%s: %d views, min %.2f s, 5th percentile %.2f s, median %.2f s\n",
			dir, len(m), m[0].Seconds(), m[len(m)/20].Seconds(), m[len(m)/2].Seconds())
	}
	return 0
}

// runFlags parses `chaos run`'s flags; false: they are wrong (and said so).
func runFlags(args []string, stderr io.Writer) (chaos.Options, bool) {
	fs := flag.NewFlagSet("chaos run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o chaos.Options
	fs.StringVar(&o.Scenario, "scenario", "", "fault to inject (chaos list); all: every one in turn")
	fs.IntVar(&o.Nodes, "nodes", 3, "presenced processes")
	fs.IntVar(&o.Devices, "devices", 30, "simulated devices, spread over the nodes")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds, each on a fresh cluster, victims going round the nodes")
	fs.StringVar(&o.Report, "report", "chaos-report", "directory for report.json, report.html and the node logs")
	fs.StringVar(&o.Bin, "presenced", "", "presenced binary (default: built from this module)")
	fs.StringVar(&o.Backend, "backend", "process", "process (local presenced processes) or docker (containers of --image on a network of their own)")
	fs.StringVar(&o.Image, "image", "presence:dev", "docker backend: the image (make docker builds it)")
	fs.DurationVar(&o.Duration, "duration", time.Minute, "soak: how long to inject faults")
	fs.IntVar(&o.Users, "users", chaos.ChurnUsers, "churn: distinct users whose devices connect, each once")
	fs.IntVar(&o.Online, "online", chaos.ChurnOnline, "churn: devices connected at most at once (about)")
	fs.DurationVar(&o.Stay, "stay", chaos.ChurnStay, "churn: how long a device stays connected on average")
	fs.IntVar(&o.Waves, "waves", chaos.ChurnWaves, "churn: waves the users arrive in")
	fs.StringVar(&o.Groups, "groups", "", "partition, partition-lease: cut into sides of these sizes, joined by + (4+5, 3+3+3; the nodes are their sum); default one node from the others")
	fs.DurationVar(&o.HoldBack, "hold-back", 0, "partition-2-2-1-lease, partition-lease with --groups and no majority: freeze every node but those of the last side for this long from the cut, so that side takes the lease first (e.g. 3s)")
	fs.IntVar(&o.Kills, "kills", 0, "kill-seq: how many nodes to kill one after another (default 3 from 5 nodes on, else 2)")
	fs.IntVar(&o.Load, "load", 0, "close, gateway-crash, pause: background devices per node from load processes (cmd/bench worker), heartbeating, on chaos.LoadTiming")
	fs.StringVar(&o.LoadTiming, "load-timing", "fast", "with --load: the nodes' preset, fast or seed, with a 5 s heartbeat and a 30 s renewal (chaos.LoadTiming)")
	fs.DurationVar(&o.Idle, "idle", chaos.ChurnIdle, "churn: the nodes' --idle (lease and view actors passivate after it)")
	fs.Func("node-flags", "more flags for every node, space-separated (e.g. \"--debounce 1s\": the bounds follow)", func(v string) error {
		o.Args = append(o.Args, strings.Fields(v)...)
		return nil
	})
	fs.Func("faults", "soak: the faults it draws from, separated by ';' (chaos.SoakFaults; default all); a fault named twice is drawn twice as often", func(v string) error {
		o.Faults = append(o.Faults, strings.Split(v, ";")...)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return o, false
	}
	o.Progress = stderr // a line per round and phase while it runs
	if o.Backend != "process" && o.Backend != "docker" {
		fmt.Fprintf(stderr, "chaos: backend %q: process or docker\n", o.Backend)
		return o, false
	}
	return o, true
}

// runAll runs the scenario, or every one in turn (each in its own report
// directory): 0 if all held, 1 if one did not, 2 if one could not run.
func runAll(ctx context.Context, o chaos.Options, stdout, stderr io.Writer) int {
	names := []string{o.Scenario}
	if o.Scenario == "all" {
		names = nil
		for _, s := range chaos.Scenarios {
			if o.Backend != "docker" || !chaos.ProcessOnly(s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	base, code := o.Report, 0
	for _, name := range names {
		o.Scenario = name
		if len(names) > 1 {
			o.Report = base + "/" + name
		}
		rep, err := chaos.Run(ctx, o)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		print(stdout, rep, o.Report)
		if !rep.OK {
			code = 1
		}
	}
	return code
}

func print(w io.Writer, rep *chaos.Report, dir string) {
	if rep.Load > 0 {
		fmt.Fprintf(w, "%s: %d background devices per node from load processes, heartbeating; nodes on the %s preset with chaos.LoadTiming\n", rep.Scenario, rep.Load, rep.LoadTiming)
	}
	fmt.Fprintf(w, "%s: %d nodes, %d devices, %d rounds, %.0f s (%s, %d cores)\n", rep.Scenario, rep.Nodes, rep.Devices, len(rep.Rounds), rep.Seconds, rep.Machine.CPU, rep.Machine.Cores)
	fmt.Fprintf(w, "  %-15s %6s %9s %9s %9s %9s\n", "bound", "n", "min ms", "median", "max", "bound")
	for _, s := range rep.Summary {
		fmt.Fprintf(w, "  %-15s %6d %9.0f %9.0f %9.0f %9.0f\n", s.Bound, s.N, s.MinMs, s.MedMs, s.MaxMs, s.BoundMs)
	}
	for _, r := range rep.Rounds {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  round %d: %s\n", r.Index, n)
		}
		for _, f := range r.Findings {
			fmt.Fprintf(w, "  round %d: %s %s %s: %s\n", r.Index, f.Kind, f.Device, f.Watcher, f.Detail)
		}
	}
	if rep.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", rep.Error)
	}
	verdict := "ok"
	if !rep.OK {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "  %s; report: %s/report.html\n", verdict, dir)
}
