package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options of a comparison run (cmd/bench run).
type Options struct {
	N           int           // device connections per system
	Nodes       int           // presenced nodes in one cluster (the peer: peer processes on one Redis); 0: 1
	Devices     int           // devices per user, each on another node where there are several (d, phone); 0: 1
	Renew       time.Duration // presenced's --renew (--ttl 2.5 x it); 0: the seed's
	DSN         string        // presenced's --policy-dsn; "": SQLite in the run's directory
	Secret      string        // device-token key of the load processes; "": the bench's own
	Runs        int           // repetitions: min / median / max over them
	Idle        time.Duration // heartbeats only, before the idle RSS
	Hold        time.Duration // presence's first run keeps its devices this long (>= Idle) and counts closes nobody asked for
	Interval    time.Duration // heartbeat period of every device
	Debounce    time.Duration // presenced's --debounce (subtracted from its fan-out latency)
	Concurrency int           // dials in flight over all load processes (cold connect)
	PerWorker   int           // devices per load process (each dials from its own 127.0.0.x)
	Subs        int           // users subscribed (each of their devices) to the one user that goes offline
	Rounds      int           // offlines per run
	LookupRate  int           // lookups per second while the heartbeats flow
	Binary      bool          // devices speak presence.v1.proto
	AckEvery    bool          // every heartbeat without the ack field (acked), as before it; default: acks asked as the SDKs ask
	Webhook     bool          // presenced posts its webhooks to one endpoint, a receiver in this process
	NodeArgs    []string      // more presenced flags (the storm smoke test's short batch window)
	Systems     []string      // "presence", "redis-ttl", "centrifugo"; empty: defaultSystems
	Bin         string        // directory holding presenced
	Centrifugo  string        // the centrifugo binary; "": Bin/centrifugo (scripts/centrifugo.sh)
	CFProtocol  bool          // the load processes speak Centrifugo's protocol (connect sets it for Centrifugo)
	Self        string        // this binary (cmd/bench): its peer and worker commands
	RedisServer string        // redis-server binary
	Dir         string        // logs and stores of the runs
	Profile     string        // directory for presence's CPU profiles of each connect phase, idle window and the fan-out rounds, and its heap profile after the idle window; "": none
	Progress    io.Writer     // the progress bar (a terminal); nil: none
}

// Defaults fills what o leaves zero: 19,000 devices, 3 runs, 60 s idle,
// heartbeats every 5 s, 100 dials in flight, 5,000 subscribers.
func (o *Options) Defaults() {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&o.N, 19000)
	def(&o.Runs, 3)
	def(&o.Concurrency, 100)
	def(&o.PerWorker, PerWorker)
	def(&o.Subs, 5000)
	def(&o.Rounds, 3)
	def(&o.LookupRate, 20)
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{&o.Idle, 60 * time.Second}, {&o.Interval, 5 * time.Second}, {&o.Debounce, time.Second}} {
		if *d.p <= 0 {
			*d.p = d.v
		}
	}
	o.Devices = min(max(o.Devices, 1), len(deviceNames))
	o.Subs = min(o.Subs, o.N/o.Devices)
	if len(o.Systems) == 0 {
		o.Systems = o.defaultSystems()
	}
}

// RunResult is what one run of one system measured.
type RunResult struct {
	System         string
	RSSConnect     float64 // bytes per device, after connecting
	RSSIdle        float64 // bytes per device, after Idle of heartbeats
	Heap           float64 // bytes per device (Go heap; the peer's plus Redis's used_memory)
	LiveHeap       float64 // bytes per device after a forced collection (the peer's plus Redis's used_memory)
	BeatBytes      float64 // bytes the load wrote per heartbeat in the idle window (WebSocket frames)
	AnswerBytes    float64 // bytes the load read per heartbeat in the idle window (acks; Centrifugo: its pings)
	BeatP99        float64 // seconds: presence's presence_heartbeat_processing_seconds p99 over the idle window; NaN: not measured
	CPUPerBeat     time.Duration
	Beats          int64
	LookupP99      time.Duration
	LookupMax      time.Duration
	Lookups        int
	LookupErrors   int
	ConnectRate    float64 // devices per second, cold
	ConnectErrors  int64
	ConnectCPU     time.Duration   // the system's CPU (user + kernel) over the connect phase, per device
	LoadCPU        time.Duration   // the load processes' CPU over the connect phase, per device
	Fanout         []time.Duration // every subscriber of every round, after the debounce
	FanoutExpected int
	Unexpected     int64  // connections that ended without the load asking
	Codes          string // their close codes (-1: no close frame, e.g. EOF)
	Errors         string
	ServerCloses   string
	FanoutWrites   string        // presence: its nodes' own time per event from the view's hand-over to the last socket write (presence_fanout_seconds)
	Held           time.Duration // how long the devices were held before Unexpected was read
	ConnectStore   string        // presence: its store writer's commits over the connect phase
	Webhooks       string        // presence with Webhook: what the receiver got and the nodes counted
	WebhookEvents  int64         // presence with Webhook: events the receiver got
	FanoutCost     FanoutCost    // what the scheduler gave the fan-out rounds
}

// FanoutCost is what the fan-out rounds got from the scheduler, over each
// round's burst of events (the reads every cpuEvery that bracket them):
// the system's and the load processes' CPU and wait for a core per event,
// µs, less what they had at the rate of the quiet window before its close
// (the heartbeats'); and the share of the machine's cores left idle from
// each round's first event received to its last, %. NaN: not measured.
type FanoutCost struct {
	CPU, LoadCPU, Wait, LoadWait, Idle float64
}

func unmeasuredFanout() FanoutCost {
	nan := math.NaN()
	return FanoutCost{nan, nan, nan, nan, nan}
}

// Run measures every system Runs times, alternating them, and returns all
// results. Once ctx ends (bench run's SIGINT or SIGTERM) it returns ctx's
// error at the next phase instead of going on.
func Run(ctx context.Context, o Options) ([]RunResult, error) {
	o.Defaults()
	if o.Profile != "" { // the workers write their profiles there too
		if err := os.MkdirAll(o.Profile, 0o755); err != nil {
			return nil, fmt.Errorf("bench: --profile: %w", err)
		}
	}
	if err := o.preflight(); err != nil {
		return nil, err
	}
	var out []RunResult
	for r := range o.Runs {
		for _, name := range o.Systems {
			dir, err := os.MkdirTemp(o.Dir, name+"-")
			if err != nil {
				return out, err
			}
			res, err := runOnce(ctx, o, name, dir, r == 0 && name == "presence")
			if err != nil {
				return out, fmt.Errorf("%s run %d: %w (logs in %s)", name, r+1, err, dir)
			}
			out = append(out, res)
			o.progressf("\r\033[K%s run %d/%d done\n", name, r+1, o.Runs)
		}
	}
	return out, nil
}

// preflight finds each system's binaries before the first run starts, so
// that a machine without one stops at once with what to install, not
// after minutes of the systems before it.
func (o Options) preflight() error {
	for _, name := range o.Systems {
		var bin, hint string
		switch name {
		case "presence":
			bin, hint = filepath.Join(o.Bin, "presenced"), "make build (or --bin DIR)"
		case "redis-ttl":
			bin, hint = o.RedisServer, "make tools installs it (or --redis-server, or --systems without redis-ttl)"
		case "centrifugo":
			bin, hint = o.centrifugoBin(), "make centrifugo installs it (or --systems without centrifugo)"
		default:
			return fmt.Errorf("bench: unknown system %q", name)
		}
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s needs %s: %w; %s", name, bin, err, hint)
		}
	}
	return nil
}

func (o Options) progressf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format, args...)
	}
}

func start(o Options, name, dir string) (system, error) {
	switch name {
	case "presence":
		return startPresence(o, dir)
	case "redis-ttl":
		return startPeer(o, dir)
	case "centrifugo":
		return startCentrifugo(o, dir)
	}
	return nil, fmt.Errorf("bench: unknown system %q", name)
}

// deviceNames are the devices of a user when Options.Devices > 1 (a policy
// names at most 5,000 contacts: 10,000 subscribers are 5,000 users with
// two devices each); the peer's lookup reads both.
var deviceNames = []string{"d", "phone"}

// users are the bench's device users, bench000000 up.
func users(from, n int) []string {
	u := make([]string, n)
	for i := range u {
		u[i] = fmt.Sprintf("bench%06d", from+i)
	}
	return u
}

const target = "benchtarget"

func runOnce(ctx context.Context, o Options, name, dir string, hold bool) (RunResult, error) {
	res := RunResult{System: name, FanoutCost: unmeasuredFanout()}
	sys, err := start(o, name, dir)
	if err != nil {
		return res, err
	}
	defer sys.Stop()
	if err := sys.Allow(target, users(0, o.Subs)); err != nil {
		return res, err
	}
	m0, err := memoryOf(sys)
	if err != nil {
		return res, err
	}
	ws, err := connect(o, sys, dir, &res)
	if ws != nil {
		defer stopWorkers(ws)
	}
	if err != nil {
		return res, err
	}
	res.ConnectStore = connectStore(sys)
	n := float64(o.N)
	rss1, _ := rss(sys.Pids()...)
	res.RSSConnect = (rss1 - m0.rss) / n
	if err := idle(ctx, o, sys, ws, &res, hold); err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil { // stopped (SIGINT, SIGTERM): a cut window is no result
		return res, err
	}
	m2, err := memoryOf(sys)
	if err != nil {
		return res, err
	}
	res.RSSIdle, res.Heap, res.LiveHeap = (m2.rss-m0.rss)/n, (m2.heap-m0.heap)/n, (m2.live-m0.live)/n
	if err := fanout(ctx, o, sys, ws, &res); err != nil {
		return res, err
	}
	st, err := collectStats(ws)
	if err != nil {
		return res, err
	}
	res.Unexpected, res.Codes, res.Errors = st.unexpected, codesString(st.codes), strings.Join(st.errs, " | ")
	res.ServerCloses = sys.ServerCloses()
	if p, ok := sys.(*presenceSys); ok {
		res.FanoutWrites, res.Webhooks = p.fanoutWrites(), p.webhooks()
		if p.hooks != nil {
			res.WebhookEvents = p.hooks.events.Load()
		}
	}
	return res, nil
}

// memory is what a system holds: RSS, Go heap in use, live heap.
type memory struct{ rss, heap, live float64 }

// memoryOf reads sys's memory, the live heap last: its forced collection
// must not move the two others.
func memoryOf(sys system) (memory, error) {
	var m memory
	var err error
	if m.rss, err = rss(sys.Pids()...); err != nil {
		return m, err
	}
	if m.heap, err = sys.Heap(); err != nil {
		return m, err
	}
	m.live, err = sys.LiveHeap()
	return m, err
}

// connectStore says how presence's store writer grouped the connect's
// attempt floors: commits, writes per commit, time per commit (a SQL
// store; "" for the peer and the memory store).
func connectStore(sys system) string {
	p, ok := sys.(*presenceSys)
	if !ok {
		return ""
	}
	m, err := p.metrics("presence_store_")
	if c := sum(m, "presence_store_batch_writes_count"); err == nil && c > 0 {
		return fmt.Sprintf("%.0f commits on connect, %.1f writes and %.2f ms each", c,
			sum(m, "presence_store_batch_writes_sum")/c, 1000*sum(m, "presence_store_commit_seconds_sum")/c)
	}
	return ""
}

func codesString(m map[string]int64) string {
	var parts []string
	for c, n := range m {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", c, n))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// connect starts the load processes and waits until each has dialed all
// of its devices, drawing a progress bar; the rate is all devices over the
// time from the first dial to the last answer.
func connect(o Options, sys system, dir string, res *RunResult) ([]*workerProc, error) {
	cpu0, _ := cpuTime(sys.Pids()...)
	_, o.CFProtocol = sys.(*centrifugoSys)
	ws, err := spawnWorkers(o, sys.URLs(), dir)
	if err != nil {
		return nil, err
	}
	var profiled sync.WaitGroup // the idle window's profile must not start before this one ends
	defer profiled.Wait()
	if p, ok := sys.(connectProfiler); ok && o.Profile != "" {
		profiled.Go(func() {
			p.profile(o.connectWindow(), filepath.Join(o.Profile, fmt.Sprintf("%sconnect-%d.pprof", p.profilePrefix(), time.Now().Unix())))
		})
	}
	stop := make(chan struct{})
	var bar sync.WaitGroup
	bar.Go(func() { o.bar(stop, sys.Name()+" connect", o.N, ws) })
	var first, last int64
	var fail error
	for _, w := range ws {
		f, err := w.await("connected", 5*time.Minute)
		if err != nil {
			fail = err
			break
		}
		v := make([]int64, 4)
		for i := range v {
			v[i], _ = strconv.ParseInt(f[i], 10, 64)
		}
		res.ConnectErrors += v[1]
		if first == 0 || v[2] < first {
			first = v[2]
		}
		last = max(last, v[3])
	}
	close(stop)
	bar.Wait()
	if fail != nil {
		return ws, fail
	}
	cpu1, _ := cpuTime(sys.Pids()...)
	load, _ := cpuTime(workerPids(ws)...) // fresh processes: all of it is the connect's
	res.ConnectCPU, res.LoadCPU = (cpu1-cpu0)/time.Duration(o.N), load/time.Duration(o.N)
	if res.ConnectErrors > 0 {
		return ws, fmt.Errorf("bench: %d of %d devices could not connect", res.ConnectErrors, o.N)
	}
	res.ConnectRate = float64(o.N) / time.Duration(last-first).Seconds()
	return ws, nil
}

// connectProfiler is a system whose connect phase --profile profiles:
// presence (connect-*.pprof) and Centrifugo (centrifugo-connect-*.pprof),
// so that a connect's cost can be compared by where it goes.
type connectProfiler interface {
	profile(d time.Duration, path string)
	profilePrefix() string
}

// connectWindow is how long the connect phase's CPU profile runs: about
// half of the phase at 1,000 devices a second, at least 2 s.
func (o Options) connectWindow() time.Duration {
	return max(2*time.Second, time.Duration(o.N/2)*time.Millisecond)
}

func (o Options) bar(stop chan struct{}, what string, total int, ws []*workerProc) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		var n int64
		for _, w := range ws {
			n += w.progress.Load()
		}
		const width = 30
		k := min(width, int(int64(width)*n/int64(max(total, 1))))
		o.progressf("\r\033[K%s [%s%s] %d/%d", what, strings.Repeat("#", k), strings.Repeat(".", width-k), n, total)
		select {
		case <-stop:
			o.progressf("\r\033[K")
			return
		case <-t.C:
		}
	}
}

// idle lets the heartbeats flow for Idle (Hold when hold), measuring the
// system's CPU per heartbeat sent (acked or not: the SDKs ask for few
// acks) and, meanwhile, lookups of random devices at LookupRate, one at a
// time.
func idle(ctx context.Context, o Options, sys system, ws []*workerProc, res *RunResult, hold bool) error {
	st0, err := collectStats(ws)
	if err != nil {
		return err
	}
	cpu0, _ := cpuTime(sys.Pids()...)
	beats0 := beatTimes(sys)
	t0 := time.Now()
	stop := make(chan struct{})
	lat := make(chan []lookup, 1)
	go func() { lat <- lookups(o, sys, stop, &res.LookupErrors) }()
	if p, ok := sys.(*presenceSys); ok && o.Profile != "" {
		go p.profile(o.Idle*3/4, filepath.Join(o.Profile, fmt.Sprintf("cpu-%d.pprof", time.Now().Unix())))
		go p.traces(o.Idle/2, traceSpan, o.Profile)
	}
	o.waitBar(ctx, sys.Name()+" idle", t0, o.Idle)
	close(stop)
	cpu1, _ := cpuTime(sys.Pids()...)
	st1, err := collectStats(ws)
	if err != nil {
		return err
	}
	if p, ok := sys.(*presenceSys); ok && o.Profile != "" {
		p.savePprof(time.Minute, "/debug/pprof/heap", filepath.Join(o.Profile, fmt.Sprintf("heap-%d.pprof", time.Now().Unix())))
	}
	res.Beats = st1.sent - st0.sent
	if res.Beats > 0 {
		res.CPUPerBeat = (cpu1 - cpu0) / time.Duration(res.Beats)
		res.BeatBytes = float64(st1.wrote-st0.wrote) / float64(res.Beats)
		res.AnswerBytes = float64(st1.read-st0.read) / float64(res.Beats)
	}
	res.BeatP99 = math.NaN()
	if beats0 != nil {
		res.BeatP99 = bucketQuantile(beats0, beatTimes(sys), 0.99)
	}
	l := <-lat
	if o.Profile != "" {
		saveLookups(filepath.Join(o.Profile, fmt.Sprintf("lookups-%s-%d.txt", sys.Name(), time.Now().Unix())), l)
	}
	d := make([]time.Duration, len(l))
	for i, x := range l {
		d[i] = x.d
	}
	res.Lookups = len(d)
	res.LookupP99, res.LookupMax = quantile(d, 0.99), quantile(d, 1)
	if hold && o.Hold > o.Idle {
		o.waitBar(ctx, sys.Name()+" hold", t0, o.Hold)
	}
	res.Held = time.Since(t0)
	return nil
}

func (o Options) waitBar(ctx context.Context, what string, t0 time.Time, d time.Duration) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for time.Since(t0) < d && ctx.Err() == nil {
		s := int(time.Since(t0).Seconds())
		o.progressf("\r\033[K%s %d/%d s", what, s, int(d.Seconds()))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	o.progressf("\r\033[K")
}

// lookup is one timed lookup: when it started (wall clock, to find it in
// a trace) and how long it took.
type lookup struct {
	at time.Time
	d  time.Duration
}

func lookups(o Options, sys system, stop chan struct{}, errs *int) []lookup {
	c := newLookupClient(sys.LookupAddr())
	defer c.Close()
	t := time.NewTicker(time.Second / time.Duration(o.LookupRate))
	defer t.Stop()
	var l []lookup
	for {
		select {
		case <-stop:
			return l
		case <-t.C:
		}
		t0 := time.Now()
		if err := c.Get(sys.LookupRequest(fmt.Sprintf("bench%06d", rand.N(o.N/o.Devices)))); err != nil {
			*errs++
			continue
		}
		l = append(l, lookup{t0, time.Since(t0)})
	}
}

// saveLookups writes each lookup's start (Unix nanoseconds) and latency
// (nanoseconds), one a line, beside the profiles: a slow one can then be
// found in the traces of the same window.
func saveLookups(path string, l []lookup) {
	var b strings.Builder
	for _, x := range l {
		fmt.Fprintf(&b, "%d %d\n", x.at.UnixNano(), x.d.Nanoseconds())
	}
	_ = os.WriteFile(path, []byte(b.String()), 0o644)
}

// beatTimes are presence's presence_heartbeat_processing_seconds buckets,
// summed over its nodes (upper bound -> count); nil for another system or
// when they cannot be read.
func beatTimes(sys system) map[float64]float64 {
	p, ok := sys.(*presenceSys)
	if !ok {
		return nil
	}
	const prefix = `presence_heartbeat_processing_seconds_bucket{le="`
	m, err := p.metrics(prefix)
	if err != nil {
		return nil
	}
	b := map[float64]float64{}
	for k, v := range m {
		le, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(k, prefix), `"}`), 64)
		if err == nil {
			b[le] = v
		}
	}
	return b
}

// bucketQuantile is the q-quantile of what a cumulative histogram counted
// between two readings (upper bound -> count), interpolated linearly in
// its bucket as Prometheus's histogram_quantile does; NaN when nothing was
// counted, the highest finite bound when it falls in the +Inf bucket.
func bucketQuantile(before, after map[float64]float64, q float64) float64 {
	les := slices.Sorted(maps.Keys(after))
	if len(les) == 0 {
		return math.NaN()
	}
	total := after[les[len(les)-1]] - before[les[len(les)-1]]
	if total <= 0 {
		return math.NaN()
	}
	rank, lo, below := q*total, 0.0, 0.0
	for _, le := range les {
		n := after[le] - before[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return lo
			}
			return lo + (le-lo)*(rank-below)/max(n-below, 1e-12)
		}
		lo, below = le, n
	}
	return lo
}

// quantile of d (sorted in place) at q in [0, 1], nearest rank.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(q*float64(len(d))+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}
