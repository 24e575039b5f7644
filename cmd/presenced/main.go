// Command presenced is one presence node: lease and view actors, the
// gateway, the admin HTTP API. Flags, PRESENCE_<FLAG> variables and a YAML
// --config file are described in docs/operations.md; an invalid
// configuration exits 2 naming the parameter and the rule.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/internal/memreturn"
	"github.com/presence-im/presence/store"
	"github.com/presence-im/presence/store/postgres"
	"github.com/presence-im/presence/store/sqlite"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

func main() { os.Exit(run(os.Args[1:])) }

// openStore opens the store a DSN names (validated by config).
// Its writer's metrics go to reg.
func openStore(dsn string, reg prometheus.Registerer) (store.PolicyStore, store.HistoryStore, store.ArbiterStore, func(), error) {
	switch {
	case dsn == "memory":
		return store.NewMemoryPolicies(), store.NewMemoryHistory(), store.NewMemoryArbiters(), func() {}, nil
	case strings.HasPrefix(dsn, "postgres"):
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := postgres.Open(ctx, dsn)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		reg.MustRegister(s.Collectors()...)
		return s, s, s, s.Close, nil
	}
	path := strings.TrimPrefix(dsn, "sqlite:")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("store: %w", err)
	}
	s, err := sqlite.Open(path)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	reg.MustRegister(s.Collectors()...)
	return s, s, s, func() { s.Close() }, nil
}

// loadConfig loads and validates the configuration and makes the node's
// logger; done: exit with code (0 after -h, 2 on an invalid one).
func loadConfig(args []string) (cfg config.Config, log *slog.Logger, code int, done bool) {
	cfg, err := config.Load(args, os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return cfg, nil, 0, true
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "presenced:", err)
		return cfg, nil, 2, true
	}
	log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel})).With("node", cfg.NodeID)
	warnInsecure(log, cfg)
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano()
	}
	return cfg, log, 0, false
}

// listen serves the admin API, then the device listener; on an error the
// node is stopped.
func listen(api *admin.Server, ws *gateway.Server, cfg config.Config, node *actors.Node, log *slog.Logger) (*http.Server, net.Listener, error) {
	srv, ln, err := serveAdmin(api, cfg.Admin, log)
	if err != nil {
		node.Stop()
		return nil, nil, fmt.Errorf("admin: %w", err)
	}
	if err := ws.Start(); err != nil {
		_ = srv.Close()
		node.Stop()
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	return srv, ln, nil
}

// fail prints err and is the exit code.
func fail(code int, err error) int {
	fmt.Fprintln(os.Stderr, "presenced:", err)
	return code
}

func run(args []string) int {
	cfg, log, code, done := loadConfig(args)
	if done {
		return code
	}
	reg, mem := runtimeMetrics(log)
	policies, history, leases, closeStore, err := openTimedStore(cfg.PolicyDSN, cfg.Timing.HandshakeWait(), reg, log)
	if err != nil {
		return fail(1, err)
	}
	defer closeStore()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rejoin, fencedAPI, err := prepareRejoin(ctx, cfg, log)
	if err != nil {
		return fail(1, err)
	}
	hooks, err := startWebhooks(cfg, reg, log)
	if err != nil {
		return fail(1, err)
	}
	defer hooks.stop() // after the node: its views' last changes are flushed
	node, member, err := startNode(ctx, &cfg, actors.Deps{Policies: policies, History: history, Metrics: actors.NewMetrics(reg), Logger: log, Limits: cfg.Limits,
		Degrade: cfg.Degrade, Changes: hooks.sink()}, rejoin)
	fencedAPI.stop()
	if err != nil {
		return fail(2, err)
	}
	hooks.ref.Store(node)
	reg.MustRegister(node.Collector(), fenceGauge(rejoin))
	ws := gateway.New(gateway.Options{Listen: cfg.Listen, Gateway: cfg.Gateway, Registerer: reg, PreviousSecrets: bytesOf(cfg.SecretPrevious)},
		node.Gateway(), cfg.Timing, []byte(cfg.Secret), log)
	// /readyz says ready once the gateway listens, and not while draining.
	api := &admin.Server{Node: node, Members: member, Timing: cfg.Timing, Policies: policies, Gatherer: reg,
		Token: cfg.AdminToken, Log: log, Ready: ws.Ready, Addr: cfg.Admin, AllowedHosts: adminHosts(cfg), Recorder: admin.NewRecorder(0), MaxBatch: cfg.Limits.Batch,
		Webhooks: hooks.api(), Size: sizeBounds(cfg)}
	go api.Recorder.Run(ctx, node)
	go mem.Run(ctx, cfg.MemoryReturn)
	quietGC(ctx, cfg.GCQuiet, reg, log)
	srv, ln, err := listen(api, ws, cfg, node, log)
	if err != nil {
		return fail(1, err)
	}
	log.Info("node started", "listen", ws.Addr(), "admin", ln.Addr().String(), "gossip", member.cfg.Bind, "advertise", member.cfg.Advertise,
		"actor", node.Address(), "timing", cfg.Preset, "bounds", fmt.Sprintf("%+v", cfg.Timing.Bounds()))
	if cfg.Demo > 0 {
		go runDemo(ctx, node, policies, cfg, log)
	}
	select {
	case <-ctx.Done():
	case why := <-watchFence(ctx, member.Gossip(), fenceWatch(cfg, leases, log)):
		node.Fence() // no more verdicts by time from here
		node.Note("fence", why.detail)
		return fence(log, why, ws, member.Gossip(), cfg, args)
	}
	drain(log, ws, node, srv)
	return 0
}

// runtimeMetrics is the node's registry, holding the Go runtime's and the
// process's collectors, and the returner of its free heap pages, whose
// metrics it holds too. Beside the go_memstats_* figures: go_gc_heap_live_bytes,
// the heap the last collection marked live (go_memstats_heap_alloc_bytes
// counts, besides, whatever was allocated since, the scrape's own
// encoding included), and go_gc_cycles_total_gc_cycles_total, the
// collections so far, read in the same step: which collection that was.
func runtimeMetrics(log *slog.Logger) (*prometheus.Registry, *memreturn.Returner) {
	reg := prometheus.NewRegistry()
	live := collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/(heap/live:bytes|cycles/total:gc-cycles)$`)}
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(live)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := cluster.RegisterTraffic(reg); err != nil {
		log.Warn("gossip and actor transport traffic not counted", "err", err)
	}
	return reg, memreturn.New(reg, log)
}

// quietGC lowers the collector's room to percent while the node allocates
// little for its live heap (memreturn.Quiet), looking every second; not
// where GOGC is set: the operator chose.
func quietGC(ctx context.Context, percent int, reg prometheus.Registerer, log *slog.Logger) {
	if env := os.Getenv("GOGC"); percent == 0 || env != "" {
		log.Debug("collector's room left alone", "gc-quiet", percent, "GOGC", env)
		return
	}
	go memreturn.NewQuiet(percent, 100, reg, log).Run(ctx, time.Second)
}

// openTimedStore opens the store with every call timed, bounded by wait,
// and its errors counted (presence_store_seconds,
// presence_store_errors_total) and logged once per burst (store.Health).
func openTimedStore(dsn string, wait time.Duration, reg prometheus.Registerer, log *slog.Logger) (store.PolicyStore, store.HistoryStore, store.ArbiterStore, func(), error) {
	policies, history, leases, closeStore, err := openStore(dsn, reg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	sm := store.NewStoreMetrics(reg)
	sm.Health = store.NewHealth(log, reg)
	sm.Wait = wait
	return sm.InstrumentPolicies(policies), sm.InstrumentHistory(history), leases, closeStore, nil
}

// watchFence tells, once, why the node must fence itself (see
// cluster.FenceWatch); never with no gossip membership.
func watchFence(ctx context.Context, g *cluster.Gossip, w cluster.FenceWatch) <-chan fenceCause {
	fenced := make(chan fenceCause, 1)
	if g != nil {
		w.Gossip = g
		go w.Run(ctx, func(r cluster.FenceReason, detail string, base []cluster.Voter) {
			fenced <- fenceCause{string(r) + ": " + detail, base}
		})
	}
	return fenced
}

// clusterMember is the node's membership: the gossip's settings and the
// provider over it, which the node's actors read (cluster.Roster) and the
// admin API, the fence and the webhooks ask who is alive.
type clusterMember struct {
	cfg cluster.GossipConfig
	*cluster.Provider
}

// startNode starts the node's actors as a gossip cluster member (a cluster
// of one without --join), with the timings the gossip derives (cfg.Timing
// takes them); it returns the membership it joined through. rejoin: a
// fenced node's new incarnation (see prepareRejoin), or nil.
func startNode(ctx context.Context, cfg *config.Config, d actors.Deps, rejoin *cluster.Rejoin) (*actors.Node, clusterMember, error) {
	timing, prop := cluster.Timings(cfg.Preset, cfg.Timing)
	cfg.Timing = timing
	co, gcfg, err := clusterOptions(ctx, *cfg, d.Logger, rejoin)
	if err != nil {
		return nil, clusterMember{}, err
	}
	member := clusterMember{gcfg, cluster.NewProvider(gcfg)}
	co.Member, co.Propagation = member.Provider, prop
	d.NodeID, d.Timing, d.Seed, d.Cluster = cfg.NodeID, cfg.Timing, cfg.Seed, co
	node, err := actors.Start(d)
	return node, member, err
}

// serveAdmin serves the admin API on addr until the server shuts down;
// requests (an event stream above all) end then.
func serveAdmin(api *admin.Server, addr string, log *slog.Logger) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	base, endRequests := context.WithCancel(context.Background())
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return base }}
	srv.RegisterOnShutdown(endRequests)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin server", "err", err)
		}
	}()
	return srv, ln, nil
}

// drain is a graceful stop (SIGTERM): new handshakes get 503, devices are
// closed with 1001 over the drain spread, what is left releases with
// reason close.
func drain(log *slog.Logger, ws *gateway.Server, node *actors.Node, srv *http.Server) {
	log.Info("draining: new handshakes get 503, devices are closed with 1001", "devices", ws.Live())
	node.Note("drain", "shutdown")
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws.Drain(shutdown.Done())
	node.Stop() // releases whatever is left with reason close
	ws.Stop()
	_ = srv.Shutdown(shutdown)
	log.Info("stopped")
}

// sizeBounds derives /api/bounds' size section for n members alive from
// the gossip preset, the split-brain strategy and the drain spread.
func sizeBounds(cfg config.Config) func(n int) admin.SizeBounds {
	return func(n int) admin.SizeBounds {
		side := cluster.WorstMinority(n)
		ms := func(d time.Duration) int64 { return d.Milliseconds() }
		return admin.SizeBounds{Members: n, FenceDecisionMs: ms(cluster.MinorityDetection(cfg.Preset, n, side)),
			FenceMs:           ms(cluster.FenceClose(cfg.Preset, n, side, cfg.SplitBrain == cluster.StrategyLease, cfg.Gateway.DrainSpread)),
			JoinConvergenceMs: ms(cluster.Convergence(cfg.Preset, n))}
	}
}

// fenceWatch is the node's FenceWatch (its Gossip set by watchFence) with
// the strategy --split-brain names.
func fenceWatch(cfg config.Config, leases store.ArbiterStore, log *slog.Logger) cluster.FenceWatch {
	w := cluster.FenceWatch{Preset: cfg.Preset, Log: log}
	if cfg.SplitBrain == cluster.StrategyLease {
		// the TTL is the same for any cluster of up to ten members
		w.Arbiter = cluster.NewArbiter(leases, cfg.NodeID, cfg.Preset, cluster.ArbiterMembers, log)
	}
	return w
}

// warnInsecure says what a node started without its secrets (on loopback,
// or with --insecure) leaves open.
func warnInsecure(log *slog.Logger, cfg config.Config) {
	if cfg.Secret == config.DevSecret {
		log.Warn("using the public development token secret: set --secret or PRESENCE_SECRET")
	}
	if cfg.ClusterKey == "" {
		log.Warn("no cluster key: any process that reaches the gossip or actor port can join, read and write presence (docs/security.md)")
	}
}

// adminHosts are the Host names the admin API answers besides IP
// addresses, localhost and its address: --admin-allowed-hosts and the name
// the node advertises (a compose service name: the other containers call
// it so).
func adminHosts(cfg config.Config) []string {
	hosts := slices.Clone(cfg.AdminAllowedHosts)
	if cfg.Advertise != "" {
		host, _, err := net.SplitHostPort(cfg.Advertise)
		if err != nil {
			host = cfg.Advertise // no port
		}
		hosts = append(hosts, host)
	}
	return hosts
}

func bytesOf(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// clusterOptions are the gossip's and the actor remote's addresses: bound
// where the flags say, advertised where the others reach them (see
// cluster.Advertised), the remote on the gossip's host.
func clusterOptions(ctx context.Context, cfg config.Config, log *slog.Logger, rejoin *cluster.Rejoin) (*actors.ClusterOptions, cluster.GossipConfig, error) {
	adv, err := cluster.Advertised(ctx, cfg.Advertise, cfg.Gossip)
	if err != nil {
		return nil, cluster.GossipConfig{}, err
	}
	gossipHost, _, _ := net.SplitHostPort(cfg.Gossip)
	gcfg := cluster.GossipConfig{
		Name: cfg.NodeID, Bind: cfg.Gossip, Advertise: adv, Join: cfg.Join, JoinRetry: cfg.JoinRetry, Context: ctx,
		Key: []byte(cfg.ClusterKey), Preset: cfg.Preset, Logger: log,
		Meta: cluster.Meta{Listen: cfg.Listen, Admin: cfg.Admin}, Rejoin: rejoin,
	}
	co := &actors.ClusterOptions{RemoteHost: gossipHost, RemotePort: cfg.RemotePort, Key: gcfg.Key}
	if adv != "" {
		host, _, _ := net.SplitHostPort(adv)
		co.RemoteAdvertise = net.JoinHostPort(host, strconv.Itoa(cfg.RemotePort))
		// what the dashboard and the member lines show
		gcfg.Meta.Listen, gcfg.Meta.Admin = reachable(cfg.Listen, host), reachable(cfg.Admin, host)
	}
	return co, gcfg, nil
}

// reachable replaces an unspecified host (0.0.0.0) by the advertised one.
func reachable(addr, host string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || !cluster.Unspecified(h) {
		return addr
	}
	return net.JoinHostPort(host, p)
}

// rejoinArgv is the command line a fenced node re-executes with: its own
// arguments with --node-id and --join set to the node's id and seeds. Ours
// go before a "--" that would make them positional; earlier --node-id and
// --join (the caller's, or an earlier fencing's) are dropped rather than
// overridden, so a node fenced many times does not grow its command line.
// The seeds hold every original --join seed, so nothing is lost.
func rejoinArgv(prog string, args []string, nodeID string, seeds []string) []string {
	end := slices.Index(args, "--")
	if end < 0 {
		end = len(args)
	}
	argv := []string{prog}
	for i := 0; i < end; i++ {
		name, _, inline := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || (name != "node-id" && name != "join") {
			argv = append(argv, args[i])
		} else if !inline {
			i++ // its value is the next argument
		}
	}
	argv = append(argv, "--node-id", nodeID)
	if len(seeds) > 0 {
		argv = append(argv, "--join", strings.Join(seeds, ","))
	}
	return append(argv, args[end:]...)
}

// fence is what a node that may have been declared dead does (see
// cluster.FenceWatch): it stops taking devices (503), closes them with 1001
// so they reconnect to a healthy node, and re-executes itself: the same
// flags and node id, every member it knew as seeds, and a new proto.actor
// actor system id, since the others blocked the old one for good. It
// returns only if that fails, with the exit code.
func fence(log *slog.Logger, why fenceCause, ws *gateway.Server, g *cluster.Gossip, cfg config.Config, args []string) int {
	log.Warn("fenced: closing devices with 1001 and restarting as a new member", "why", why.detail, "devices", ws.Live())
	ws.Refuse() // 503 and not ready from now on
	state, err := json.Marshal(cluster.Rejoin{Base: why.base, Fenced: time.Now(), Stable: cluster.StableAfter(cfg.Preset, len(why.base)),
		Lease: cfg.SplitBrain == cluster.StrategyLease})
	if err != nil {
		panic(err) // plain data
	}
	seeds := []string{}
	for _, s := range cfg.Join {
		if s != cfg.Gossip && !slices.Contains(seeds, s) { // never rejoin through itself
			seeds = append(seeds, s)
		}
	}
	for _, m := range g.Members() {
		if m.ID != cfg.NodeID && m.State != cluster.Left && len(m.Addresses) > 0 && !slices.Contains(seeds, m.Addresses[0]) {
			seeds = append(seeds, m.Addresses[0])
		}
	}
	// Leave first: members that still count this incarnation alive reclaim
	// its leases and move its identities now, before the new one appears
	// under the same name (which memberlist would report as a mere update).
	if err := g.Leave(cluster.LeaveTimeout); err != nil {
		log.Warn("fenced: leaving the gossip", "err", err)
	}
	drained, cancel := context.WithTimeout(context.Background(), cfg.Gateway.DrainSpread+2*time.Second)
	defer cancel()
	ws.Drain(drained.Done())
	ws.Stop()
	self, err := os.Executable()
	if err == nil {
		argv := rejoinArgv(os.Args[0], args, cfg.NodeID, seeds)
		log.Debug("fenced: restarting", "seeds", seeds, "quorum_base", len(why.base))
		// The new process serves only once the split-brain resolver lets
		// it, over the base this one fenced on: two fenced nodes of a
		// minority must not form a cluster of their own.
		// A node fenced again replaces what its own fencing left: the
		// first of two equal names is the one a process reads.
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, rejoinEnv+"=") })
		err = syscall.Exec(self, argv, append(env, rejoinEnv+"="+string(state)))
	}
	log.Error("fenced: could not restart; exiting for a supervisor to restart the node", "err", err)
	return 3
}
