// Command bench compares one presenced node with the Redis-TTL design and
// with Centrifugo (BENCHMARKS.md) on the same workload, side by side in one run:
//
//	bench run [--n 19000] [--runs 3] ...   starts each system and the load processes, prints the table
//	bench peer ...                          the Redis-TTL peer server (started by run)
//	bench worker ...                        one load process (started by run)
//
// Loopback only: every address it dials or listens on is 127.0.0.0/8.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/presence-im/presence/bench"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

const usage = `usage:
  bench run [--n 19000] [--nodes 1] [--runs 3] [--idle 60s] [--hold 0] [--bin bin] [--systems presence,redis-ttl,centrifugo] [--binary]
  bench storm [--n 19000] [--nodes 1] [--runs 3] [--realtime 2] [--batched 20] [--leave 0.5] [--away 3s] [--degrade-at D ...]
  bench scale [--sizes 3,5,9] [--per-node 1000] [--window 30s] [--runs 1]
  bench store [--n 19000] [--runs 3] [--stores sqlite,postgres] [--steady 20s]
  bench peer --listen ADDR --http ADDR --redis ADDR --secret S [--heartbeat 5s] [--ttl 15s]
  bench worker --url WS --src IP --first I --count N [--concurrency C] [--interval 5s] [--binary] [--centrifugo]
`

func run(args []string, in io.Reader, out, errOut io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(errOut, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], out, errOut)
	case "store":
		return storeCmd(ctx, args[1:], out, errOut)
	case "storm":
		return stormCmd(ctx, args[1:], out, errOut)
	case "scale":
		return scaleCmd(ctx, args[1:], out, errOut)
	case "peer":
		return peerCmd(ctx, args[1:], errOut)
	case "worker":
		return workerCmd(ctx, args[1:], in, out, errOut)
	}
	fmt.Fprintf(errOut, "bench: unknown command %q\n%s", args[0], usage)
	return 2
}

func runCmd(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var o bench.Options
	fs.IntVar(&o.N, "n", 19000, "device connections per system")
	fs.IntVar(&o.Devices, "devices", 1, "devices per user (1 or 2: d, phone), each on another node where there are several")
	fs.IntVar(&o.Nodes, "nodes", 1, "presenced nodes in one cluster (the peer: peer processes on one redis-server)")
	fs.DurationVar(&o.Renew, "renew", 0, "presenced --renew (--ttl 2.5 x it; 0: the seed's 60s)")
	fs.IntVar(&o.Runs, "runs", 3, "runs of each system (min / median / max)")
	fs.DurationVar(&o.Idle, "idle", 60*time.Second, "heartbeats only, before the idle RSS and over which CPU and lookups are measured")
	fs.DurationVar(&o.Hold, "hold", 0, "presence's first run holds its devices this long (> idle) counting closes nobody asked for")
	fs.DurationVar(&o.Interval, "interval", 5*time.Second, "heartbeat period")
	fs.DurationVar(&o.Debounce, "debounce", time.Second, "presenced --debounce")
	fs.IntVar(&o.Concurrency, "concurrency", 100, "dials in flight over all load processes")
	fs.IntVar(&o.PerWorker, "per-worker", bench.PerWorker, "devices per load process (each dials from its own 127.0.0.x)")
	fs.StringVar(&o.DSN, "dsn", "", "presenced --policy-dsn (memory: the in-memory store); default SQLite in the run's directory")
	fs.IntVar(&o.Subs, "subs", 5000, "users subscribed to the user that goes offline, each with all of its --devices (a policy names at most 5,000 contacts)")
	fs.IntVar(&o.Rounds, "rounds", 3, "offlines per run")
	fs.IntVar(&o.LookupRate, "lookups", 20, "lookups per second while the heartbeats flow")
	fs.BoolVar(&o.Binary, "binary", false, "devices speak presence.v1.proto (default presence.v1.json)")
	fs.BoolVar(&o.AckEvery, "ack-every", false, "heartbeats without the ack field, every one acked, as before the field (default: acks asked as the SDKs ask, docs/protocol.md \"Acks on request\")")
	fs.BoolVar(&o.Webhook, "webhook", false, "presenced posts its webhooks (docs/webhooks.md) to one endpoint, a receiver in the bench answering 200")
	fs.StringVar(&o.Profile, "profile", "", "directory for presence's CPU profiles of each connect phase, idle window and the fan-out rounds, its heap profile after the idle window (go tool pprof -top), 5 s execution traces of the node and of the bench in the idle window (go tool trace) and each lookup's start and latency; Centrifugo's connect phase too (centrifugo-connect-*.pprof)")
	systems := fs.String("systems", "", "systems to run, comma-separated: presence, redis-ttl, centrifugo (default: all three, centrifugo where its binary is installed and on one node)")
	fs.StringVar(&o.Bin, "bin", "bin", "directory holding presenced")
	fs.StringVar(&o.Centrifugo, "centrifugo", "", "centrifugo binary (default: centrifugo in --bin; sh scripts/centrifugo.sh installs it)")
	fs.StringVar(&o.RedisServer, "redis-server", "redis-server", "redis-server binary (Debian's redis-server)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *systems != "" {
		o.Systems = strings.Split(*systems, ",")
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(errOut, "bench:", err)
		return 1
	}
	o.Self = self
	if o.Dir, err = os.MkdirTemp("", "presence-bench-"); err != nil {
		fmt.Fprintln(errOut, "bench:", err)
		return 1
	}
	o.Progress = errOut
	before := bench.Machine()
	results, err := bench.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(errOut, "bench:", err)
		return 1
	}
	bench.Report(out, o, before+" at the start; "+bench.Machine()+" at the end", results)
	_ = os.RemoveAll(o.Dir) // kept when a run fails: its logs say why
	return 0
}

func storeCmd(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("store", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var o bench.StoreOptions
	fs.IntVar(&o.N, "n", 19000, "devices that connect, then drop at once")
	fs.IntVar(&o.Runs, "runs", 3, "runs of each store (min / median / max)")
	fs.DurationVar(&o.Interval, "interval", 5*time.Second, "heartbeat period")
	fs.DurationVar(&o.Steady, "steady", 20*time.Second, "heartbeats only, over which the steady RSS is read")
	fs.IntVar(&o.Concurrency, "concurrency", 100, "dials in flight over all load processes")
	stores := fs.String("stores", "sqlite,postgres", "stores, comma-separated (postgres: a server started from the host's binaries, its default settings)")
	fs.StringVar(&o.Bin, "bin", "bin", "directory holding presenced")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.Stores = strings.Split(*stores, ",")
	var err error
	if o.Self, err = os.Executable(); err == nil {
		o.Dir, err = os.MkdirTemp("", "presence-bench-store-")
	}
	if err != nil {
		fmt.Fprintln(errOut, "bench:", err)
		return 1
	}
	o.Progress = errOut
	before := bench.Machine()
	results, err := bench.RunStore(ctx, o)
	if err != nil {
		fmt.Fprintln(errOut, "bench:", err)
		return 1
	}
	bench.ReportStore(out, o, before+" at the start; "+bench.Machine()+" at the end", results)
	_ = os.RemoveAll(o.Dir) // kept when a run fails: its logs say why
	return 0
}

func peerCmd(ctx context.Context, args []string, errOut io.Writer) int {
	fs := flag.NewFlagSet("peer", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var o bench.PeerOptions
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:7800", "device WebSocket address")
	fs.StringVar(&o.HTTP, "http", "127.0.0.1:7801", "lookup and stats address")
	fs.StringVar(&o.Redis, "redis", "127.0.0.1:6379", "redis-server address")
	secret := fs.String("secret", "", "token key")
	fs.DurationVar(&o.Heartbeat, "heartbeat", 5*time.Second, "heartbeat interval told in hello")
	fs.DurationVar(&o.TTL, "ttl", 15*time.Second, "device key lifetime after each heartbeat")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !loopback(o.Listen) || !loopback(o.HTTP) || !loopback(o.Redis) {
		fmt.Fprintln(errOut, "bench peer: loopback addresses only")
		return 2
	}
	o.Secret = []byte(*secret)
	p, err := bench.NewPeer(ctx, o)
	if err != nil {
		fmt.Fprintln(errOut, "bench peer:", err)
		return 1
	}
	if err := p.Serve(ctx); err != nil {
		fmt.Fprintln(errOut, "bench peer:", err)
		return 1
	}
	return 0
}

func workerCmd(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var o bench.WorkerOptions
	fs.StringVar(&o.URL, "url", "ws://127.0.0.1:7600/ws", "device WebSocket URL")
	fs.StringVar(&o.Src, "src", "", "source IP (127.0.0.x)")
	fs.StringVar(&o.Secret, "secret", "", "token key")
	fs.StringVar(&o.Prefix, "prefix", "bench", "user name prefix")
	fs.StringVar(&o.Device, "device", "d", "device name of every connection")
	fs.IntVar(&o.First, "first", 0, "first user number")
	fs.IntVar(&o.Count, "count", 1000, "connections")
	fs.IntVar(&o.Concurrency, "concurrency", 20, "dials in flight")
	fs.DurationVar(&o.Interval, "interval", 5*time.Second, "heartbeat period")
	fs.BoolVar(&o.Binary, "binary", false, "presence.v1.proto")
	fs.BoolVar(&o.AckEvery, "ack-every", false, "heartbeats without the ack field, every one acked")
	fs.BoolVar(&o.Centrifugo, "centrifugo", false, "the URL is Centrifugo's /connection/websocket: its JSON protocol")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "file for this process's CPU profile of its connect phase")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !strings.HasPrefix(o.URL, "ws://127.") || (o.Src != "" && !strings.HasPrefix(o.Src, "127.")) {
		fmt.Fprintln(errOut, "bench worker: loopback addresses only")
		return 2
	}
	if err := bench.RunWorker(ctx, o, in, out); err != nil {
		fmt.Fprintln(errOut, "bench worker:", err)
		return 1
	}
	return 0
}

func loopback(addr string) bool {
	return strings.HasPrefix(addr, "127.") || strings.HasPrefix(addr, "localhost:")
}

func stormCmd(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("storm", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var o bench.StormOptions
	fs.IntVar(&o.N, "n", 19000, "devices, one user each")
	fs.IntVar(&o.Runs, "runs", 3, "runs, each one wave tiered and one realtime only (min / median / max)")
	fs.IntVar(&o.Nodes, "nodes", 1, "presenced nodes in one cluster, the devices spread over them")
	fs.IntVar(&o.R, "realtime", 2, "contacts each user subscribes to in real time (the users after it)")
	fs.IntVar(&o.B, "batched", 20, "contacts each user subscribes to batched (the users after those)")
	fs.Float64Var(&o.Frac, "leave", 0.5, "share of the users that leave in the wave")
	fs.DurationVar(&o.Away, "away", 3*time.Second, "how long they stay away")
	fs.DurationVar(&o.Interval, "interval", 5*time.Second, "heartbeat period")
	fs.DurationVar(&o.Debounce, "debounce", time.Second, "presenced --debounce")
	fs.IntVar(&o.Concurrency, "concurrency", 100, "dials in flight over all load processes")
	fs.IntVar(&o.PerWorker, "per-worker", bench.PerWorker, "devices per load process")
	fs.StringVar(&o.Bin, "bin", "bin", "directory holding presenced")
	fs.DurationVar(&o.Degrade.At, "degrade-at", 0, "presenced --degrade-at (0: its default); a tiny one forces degraded mode")
	fs.DurationVar(&o.Degrade.Below, "degrade-below", 0, "presenced --degrade-below, with --degrade-at (0: its default)")
	fs.DurationVar(&o.Degrade.RestoreAfter, "restore-after", 0, "presenced --restore-after, with --degrade-at (0: its default)")
	fs.DurationVar(&o.Degrade.Pull, "degraded-pull", 0, "presenced --degraded-pull, with --degrade-at (0: its default)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(errOut, "bench:", err)
		return 1
	}
	o.Self = self
	if o.Dir, err = os.MkdirTemp("", "presence-storm-"); err != nil {
		fmt.Fprintln(errOut, "bench:", err)
		return 1
	}
	o.Progress = errOut
	before := bench.Machine()
	results, err := bench.RunStorm(ctx, o)
	if err != nil {
		fmt.Fprintln(errOut, "bench:", err)
		return 1
	}
	bench.StormReport(out, o, before+" at the start; "+bench.Machine()+" at the end", results)
	_ = os.RemoveAll(o.Dir)
	return 0
}

func scaleCmd(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var o bench.ScaleOptions
	sizes := fs.String("sizes", "3,5,9", "cluster sizes, comma-separated, each a fresh cluster")
	fs.IntVar(&o.PerNode, "per-node", 1000, "heartbeating devices per node")
	fs.DurationVar(&o.Window, "window", 30*time.Second, "the steady window each node's traffic is read over")
	fs.IntVar(&o.Runs, "runs", 1, "runs of each size (min / median / max)")
	fs.DurationVar(&o.Interval, "interval", 5*time.Second, "heartbeat period")
	fs.DurationVar(&o.Renew, "renew", 0, "presenced --renew (--ttl 2.5 x it; 0: the seed's 60s)")
	fs.StringVar(&o.Bin, "bin", "bin", "directory holding presenced")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fmt.Fprintf(errOut, "bench: --sizes: %q is not a cluster size\n", f)
			return 2
		}
		o.Sizes = append(o.Sizes, n)
	}
	self, err := os.Executable()
	if err == nil {
		o.Self = self
		o.Dir, err = os.MkdirTemp("", "presence-scale-")
	}
	if err != nil {
		fmt.Fprintln(errOut, "bench:", err)
		return 1
	}
	o.Progress = errOut
	before := bench.Machine()
	results, err := bench.RunScale(ctx, o)
	if err != nil {
		fmt.Fprintln(errOut, "bench:", err)
		return 1
	}
	bench.ScaleReport(out, o, before+" at the start; "+bench.Machine()+" at the end", results)
	_ = os.RemoveAll(o.Dir)
	return 0
}
