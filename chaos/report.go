package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Options of a run.
type Options struct {
	Scenario string
	Nodes    int
	Devices  int
	Rounds   int           // rounds, each on a fresh cluster; victims go round the nodes
	Report   string        // directory for report.json, report.html and node logs
	Bin      string        // presenced binary; built into Report when empty (process backend)
	Backend  string        // "process" (default) or "docker"
	Image    string        // docker backend: the image (`make docker`: presence:dev)
	Duration time.Duration // soak: how long
	Faults   []string      // soak: the faults it draws from, by name (SoakFaults); empty: all
	Args     []string      // more flags for every node (e.g. --debounce 1s)
	// churn: the distinct users, the devices connected at most at once,
	// how long each stays on average, and the nodes' --idle (0: the
	// Churn* defaults).
	Users    int
	Online   int
	Stay     time.Duration
	Idle     time.Duration
	Waves    int
	Progress io.Writer // a line per round and phase, and devices up every 5 s; nil: quiet
	// Load is background devices per node from load processes (cmd/bench
	// worker), heartbeating under LoadTiming, while the watched devices
	// measure the bounds; 0: none. LoadBin is cmd/bench, built when empty.
	// LoadTiming is the nodes' preset under --load, fast (default) or
	// seed, with LoadTiming's changes.
	Load       int
	LoadBin    string
	LoadTiming string
	// Groups cuts partition and partition-lease into sides of these sizes
	// ("4+5", "3+3+3"; the nodes are their sum); "": one node from the
	// others. Kills is kill-seq's count (0: DefaultKills).
	Groups string
	Kills  int
	// HoldBack, in the partitions under --split-brain lease, freezes every
	// node but those of the last side (SIGSTOP; docker pause) for this
	// long from the cut, so that side takes the lease first and serves
	// while it still declares the others dead one by one: how a node cut
	// off alone served in a CI run of partition-2-2-1-lease, rare on its
	// own (2 rounds of 30). 0: none.
	HoldBack time.Duration

	groups []int // Groups parsed
}

// Report is what a run measured and found.
type Report struct {
	Scenario   string             `json:"scenario"`
	About      string             `json:"about"`
	Nodes      int                `json:"nodes"`
	Devices    int                `json:"devices"`
	Groups     string             `json:"groups,omitempty"`        // the partition's sides (--groups)
	Kills      int                `json:"kills,omitempty"`         // kill-seq's crashes
	HoldBack   string             `json:"hold_back,omitempty"`     // the partition's hold-back (--hold-back)
	Load       int                `json:"load_per_node,omitempty"` // background devices per node (--load)
	LoadTiming string             `json:"load_timing,omitempty"`   // their nodes' preset (--load-timing)
	Backend    string             `json:"backend,omitempty"`
	Bounds     map[string]float64 `json:"bounds_ms"`
	Timing     map[string]float64 `json:"timing_ms"`
	Machine    Machine            `json:"machine"`
	Started    time.Time          `json:"started"`
	Seconds    float64            `json:"seconds"`
	Rounds     []*Round           `json:"rounds"`
	Summary    []Summary          `json:"summary"`
	Findings   map[string]int     `json:"findings"` // by kind: false_offline, ghost, lost, ...
	OK         bool               `json:"ok"`
	Error      string             `json:"error,omitempty"`
}

// Machine is where the figures come from.
type Machine struct {
	CPU   string `json:"cpu"`
	Cores int    `json:"cores"`
	OS    string `json:"os"`
	Go    string `json:"go"`
}

// Round is one fault on a fresh cluster.
type Round struct {
	Index     int       `json:"index"`
	Victim    string    `json:"victim"`
	Fault     string    `json:"fault"`
	Latencies []Latency `json:"latencies"`
	Findings  []Finding `json:"findings"`
	Notes     []string  `json:"notes,omitempty"`
	Churn     *Churn    `json:"churn,omitempty"` // the churn scenario's measurements
	Start     time.Time `json:"start"`           // the round's cluster starting
	FaultAt   time.Time `json:"fault_at"`        // set up: the scenario begins
	End       time.Time `json:"end"`
	Faults    []Mark    `json:"faults,omitempty"` // each fault injected, at its moment
}

// Latency is from a device's departure to a watcher receiving its offline.
type Latency struct {
	Device  string  `json:"device"`
	Watcher string  `json:"watcher"`
	Bound   string  `json:"bound"`
	Ms      float64 `json:"ms"`
	BoundMs float64 `json:"bound_ms"`
}

// Finding is something that must not happen: a false offline, a ghost, a
// lost event, a version going back, a node that did not fence or rejoin,
// a latency past its bound.
type Finding struct {
	Kind    string `json:"kind"`
	Device  string `json:"device,omitempty"`
	Watcher string `json:"watcher,omitempty"`
	Detail  string `json:"detail"`
	// At is when a watcher got the event found wrong, where there was one
	// (false_offline): the log excerpt of a failed test ends there.
	At time.Time `json:"at,omitzero"`
}

// Summary is the latencies against one bound.
type Summary struct {
	Bound   string  `json:"bound"`
	N       int     `json:"n"`
	MinMs   float64 `json:"min_ms"`
	MedMs   float64 `json:"median_ms"`
	MaxMs   float64 `json:"max_ms"`
	BoundMs float64 `json:"bound_ms"`
	Within  int     `json:"within"`
}

func (r *Round) find(kind, device, watcher, detail string) {
	r.findAt(time.Time{}, kind, device, watcher, detail)
}

// findAt is find for an event a watcher got at at.
func (r *Round) findAt(at time.Time, kind, device, watcher, detail string) {
	r.Findings = append(r.Findings, Finding{Kind: kind, Device: device, Watcher: watcher, Detail: detail, At: at})
}

// Run runs a scenario and writes the report; the report says whether
// everything was within bounds and nothing went wrong.
func Run(ctx context.Context, o Options) (*Report, error) {
	sc, ok := Find(o.Scenario)
	if !ok {
		return nil, fmt.Errorf("chaos: no scenario %q (chaos list)", o.Scenario)
	}
	if err := o.prepare(ctx, sc); err != nil {
		return nil, err
	}
	rep := &Report{Scenario: sc.Name, About: sc.About, Nodes: o.Nodes, Devices: o.Devices, Groups: o.Groups, Kills: o.Kills, HoldBack: holdBack(o.HoldBack), Load: o.Load, LoadTiming: o.LoadTiming, Machine: machine(), Started: time.Now(), Findings: map[string]int{}}
	rep.Backend = o.Backend
	for i := range o.Rounds {
		r := &Round{Index: i, Start: time.Now()}
		o.progress("round %d/%d: starting %d nodes and %d devices", i+1, o.Rounds, o.Nodes, o.Devices)
		rep.Rounds = append(rep.Rounds, r)
		dir := filepath.Join(o.Report, fmt.Sprintf("round-%d", i))
		if err := os.RemoveAll(dir); err != nil { // a fresh store every round
			return nil, err
		}
		err := runRound(ctx, o, sc, rep, r, dir)
		r.End = time.Now()
		o.progress("round %d/%d: done in %.1f s: %d latencies, %d findings", i+1, o.Rounds, r.End.Sub(r.Start).Seconds(), len(r.Latencies), len(r.Findings))
		if err != nil {
			rep.Error = err.Error()
			break
		}
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	rep.summarize()
	return rep, rep.write(o.Report)
}

// prepare checks o for sc, fills its defaults (the scenario's node count,
// churn, the docker image) and builds what the rounds run: the load's
// binary and, for processes, presenced.
func (o *Options) prepare(ctx context.Context, sc Scenario) error {
	if sc.Nodes > 0 {
		o.Nodes = sc.Nodes
	}
	if err := o.validSize(sc); err != nil {
		return err
	}
	if o.Nodes < 3 || o.Devices < o.Nodes || o.Rounds < 1 {
		return fmt.Errorf("chaos: want --nodes >= 3 (a majority must survive one node), --devices >= nodes and --rounds >= 1")
	}
	if isStoreScenario(sc.Name) && o.Backend == "docker" {
		return fmt.Errorf("chaos: %s runs on the process backend (its PostgreSQL is internal/pgtest's)", sc.Name)
	}
	if err := o.validLoad(); err != nil {
		return err
	}
	if o.HoldBack > 0 && sc.Name != "partition-2-2-1-lease" && (sc.Name != "partition-lease" || o.Groups == "") {
		return fmt.Errorf("chaos: --hold-back is for partition-2-2-1-lease and partition-lease with --groups, not %s", sc.Name)
	}
	if err := os.MkdirAll(o.Report, 0o755); err != nil {
		return err
	}
	o.churnDefaults()
	switch o.Backend {
	case "", "process":
	case "docker":
		if o.Image == "" {
			o.Image = "presence:dev"
		}
	default:
		return fmt.Errorf("chaos: backend %q: process or docker", o.Backend)
	}
	if err := o.buildLoad(ctx); err != nil {
		return err
	}
	if o.Backend != "docker" && o.Bin == "" {
		bin, err := Build(ctx, o.Report)
		if err != nil {
			return err
		}
		o.Bin = bin
	}
	return nil
}

// runRound runs one round on a fresh cluster in dir; the round's devices
// and watchers end with it.
func runRound(ctx context.Context, o Options, sc Scenario, rep *Report, r *Round, dir string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e, err := setup(ctx, o, dir)
	if err != nil {
		return err
	}
	defer e.stopStore() // after the nodes
	defer e.Cluster.Stop()
	defer func() {
		if e.sdkLog != nil {
			_ = e.sdkLog.Close()
		}
	}()
	rep.Bounds, rep.Timing = e.Bounds, e.Timing
	if e.load != nil {
		defer e.load.Stop()
	}
	load := e.loadBefore()
	r.FaultAt = time.Now()
	o.progress("round %d/%d: %s, %d/%d devices up", r.Index+1, o.Rounds, sc.Name, e.Fleet.Up(), len(e.Fleet.Devices))
	go o.watchProgress(ctx, r.Index, e)
	err = sc.run(ctx, e, r)
	if e.load != nil {
		e.checkLoad(r, load, sc.Name != "close")
	}
	r.Faults = e.Cluster.Marks(r.FaultAt)
	checkVersions(e, r)
	diagnose(ctx, e, r, dir)
	return err
}

// diagnose saves, for each device a watcher did not see leave or holds
// wrongly, every alive node's view of its user and those watchers'
// connections (GET /api/actors) in dir/diagnose.json: which subscribers
// the view knew of, by node, and what each watcher subscribed to.
func diagnose(ctx context.Context, e *Env, r *Round, dir string) {
	users, watchers := map[string]bool{}, map[string]bool{}
	for _, f := range r.Findings {
		if (f.Kind == "lost" || f.Kind == "wrong_final" || f.Kind == "lost_route") && f.Device != "" {
			users[f.Device] = true
			if f.Watcher != "" {
				watchers[f.Watcher] = true
			}
		}
	}
	if len(users) == 0 {
		return
	}
	out := map[string]json.RawMessage{}
	ask := func(n *Node, kind, q string) {
		var page json.RawMessage
		if _, err := n.get(ctx, "/api/actors?limit=200&kind="+kind+"&q="+url.QueryEscape(q), &page); err != nil {
			page, _ = json.Marshal(err.Error())
		}
		out[n.ID+" "+kind+" "+q] = page
	}
	for _, n := range e.Cluster.Nodes {
		if !n.Alive() {
			continue
		}
		for u := range users {
			ask(n, "view", u)
		}
		for w := range watchers {
			ask(n, "connection", w+"/")
		}
	}
	if b, err := json.MarshalIndent(out, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "diagnose.json"), b, 0o644)
	}
}

// checkVersions: every watcher sees each target's versions strictly grow.
func checkVersions(e *Env, r *Round) {
	for _, w := range e.Fleet.Watchers {
		last := map[string]uint64{}
		for _, ev := range w.Events() {
			if v, ok := last[ev.Target]; ok && ev.Version <= v {
				r.find("version_regression", ev.Target, w.User, fmt.Sprintf("version %d after %d", ev.Version, v))
			}
			last[ev.Target] = ev.Version
		}
	}
}

func (rep *Report) summarize() {
	by := map[string][]Latency{}
	for _, r := range rep.Rounds {
		for _, l := range r.Latencies {
			by[l.Bound] = append(by[l.Bound], l)
			if l.Ms > l.BoundMs {
				r.find("over_bound", l.Device, l.Watcher, fmt.Sprintf("%.0f ms, %s bound %.0f ms", l.Ms, l.Bound, l.BoundMs))
			}
		}
		for _, f := range r.Findings {
			rep.Findings[f.Kind]++
		}
	}
	for name, ls := range by {
		ms := make([]float64, len(ls))
		s := Summary{Bound: name, N: len(ls), BoundMs: ls[0].BoundMs}
		for i, l := range ls {
			ms[i] = l.Ms
			if l.Ms <= l.BoundMs {
				s.Within++
			}
		}
		slices.Sort(ms)
		s.MinMs, s.MaxMs = ms[0], ms[len(ms)-1]
		if len(ms)%2 == 1 {
			s.MedMs = ms[len(ms)/2]
		} else {
			s.MedMs = (ms[len(ms)/2-1] + ms[len(ms)/2]) / 2
		}
		rep.Summary = append(rep.Summary, s)
	}
	slices.SortFunc(rep.Summary, func(a, b Summary) int { return strings.Compare(a.Bound, b.Bound) })
	churn := len(rep.Rounds) > 0 && rep.Rounds[0].Churn != nil && len(rep.Rounds[0].Churn.Checks) > 0
	rep.OK = rep.Error == "" && len(rep.Findings) == 0 && (len(rep.Summary) > 0 || churn)
}

func (rep *Report) write(dir string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return err
	}
	defer f.Close()
	return page.Execute(f, rep)
}

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{"mb": func(b float64) float64 { return b / 1e6 }, "inc": func(i int) int { return i + 1 }}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>chaos: {{.Scenario}}</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}th{background:#f4f4f4}.bad{color:#b00}.ok{color:#070}</style></head>
<body>
<h1>chaos: {{.Scenario}} <span class="{{if .OK}}ok{{else}}bad{{end}}">{{if .OK}}ok{{else}}FAILED{{end}}</span></h1>
<p>{{.About}}. {{.Nodes}} nodes, {{.Devices}} devices, {{len .Rounds}} rounds, {{printf "%.0f" .Seconds}} s;
{{.Machine.CPU}}, {{.Machine.Cores}} cores, {{.Machine.OS}}, {{.Machine.Go}}; started {{.Started.Format "2006-01-02 15:04:05 MST"}}.</p>
{{if .Error}}<p class="bad">error: {{.Error}}</p>{{end}}
{{if .Summary}}<h2>Latency from departure to a subscriber's offline</h2>
<table><tr><th>bound</th><th>n</th><th>min ms</th><th>median ms</th><th>max ms</th><th>bound ms</th><th>within</th></tr>
{{range .Summary}}<tr><td>{{.Bound}}</td><td>{{.N}}</td><td>{{printf "%.0f" .MinMs}}</td><td>{{printf "%.0f" .MedMs}}</td><td>{{printf "%.0f" .MaxMs}}</td><td>{{printf "%.0f" .BoundMs}}</td><td>{{.Within}}</td></tr>
{{end}}</table>
<p>Each dot is one latency, on its bound's row; the red line is the bound.</p>
{{.LatencyChart}}{{end}}
{{range .Rounds}}{{with .Churn}}{{$c := .}}<h2>Churn: actors and memory against the devices online</h2>
<p>{{.Users}} users in {{.Waves}} waves ({{printf "%.0f" .ArriveSec}} s of arrivals each; the next starts once the devices left, the window passed and the nodes were read), {{.Contacts}} contacts per device,
stay {{printf "%.1f" .StaySec}} s on average, {{.Residents}} residents, a warm-up of {{.Warm}}; idle {{printf "%.1f" .IdleSec}} s, window {{printf "%.1f" .WindowSec}} s; peak {{.PeakOnline}} online; seed {{.Seed}}.
Back to the baseline {{if ge .BackSec 0.0}}{{printf "%.1f" .BackSec}} s after the last departure{{else}}never, within the window and {{printf "%.0f" 30.0}} s{{end}}.</p>
{{.Charts}}
<table><tr><th>check</th><th>ok</th><th>detail</th></tr>
{{range .Checks}}<tr><td>{{.Name}}</td><td class="{{if .OK}}ok{{else}}bad{{end}}">{{if .OK}}ok{{else}}FAILED{{end}}</td><td style="text-align:left">{{.Detail}}</td></tr>
{{end}}</table>
<table><tr><th>node</th><th>leases base / after</th><th>views base / after</th><th>live heap MB base / after</th><th>heap in use MB base / after</th><th>RSS MB base / after</th><th>passivations</th></tr>
{{if eq (len .Final) (len .Baseline)}}{{range $i, $b := .Baseline}}{{with index $c.Final $i}}<tr><td>{{$b.Node}}</td><td>{{$b.Lease}} / {{.Lease}}</td><td>{{$b.View}} / {{.View}}</td><td>{{printf "%.1f" (mb $b.Live)}} / {{printf "%.1f" (mb .Live)}}</td><td>{{printf "%.1f" (mb $b.Heap)}} / {{printf "%.1f" (mb .Heap)}}</td><td>{{printf "%.1f" (mb $b.RSS)}} / {{printf "%.1f" (mb .RSS)}}</td><td>{{.Passivations}}</td></tr>{{end}}
{{end}}{{end}}</table>
<p>Settled readings, per node: leases, views, live heap MB, RSS MB; cold: the residents alone, before the warm-up; after each wave (the last: the final reading).</p>
<table><tr><th>reading</th><th>per node</th></tr>
<tr><td>cold</td><td style="text-align:left">{{range .Cold}}{{.Node}}: {{.Lease}}, {{.View}}, {{printf "%.1f" (mb .Live)}}, {{printf "%.1f" (mb .RSS)}}; {{end}}</td></tr>
<tr><td>baseline</td><td style="text-align:left">{{range .Baseline}}{{.Node}}: {{.Lease}}, {{.View}}, {{printf "%.1f" (mb .Live)}}, {{printf "%.1f" (mb .RSS)}}; {{end}}</td></tr>
{{range $k, $w := .AfterWave}}<tr><td>after wave {{inc $k}}</td><td style="text-align:left">{{range $w}}{{.Node}}: {{.Lease}}, {{.View}}, {{printf "%.1f" (mb .Live)}}, {{printf "%.1f" (mb .RSS)}}; {{end}}</td></tr>
{{end}}</table>{{end}}{{end}}
<h2>Faults</h2>
<p>Each round over its own time: its cluster starting (grey), then the scenario running (orange); a black tick at the moment of each fault the harness injected (hover for the time).</p>
{{.Timeline}}
<h2>Findings</h2>
{{if .Findings}}<ul>{{range $k, $v := .Findings}}<li class="bad">{{$k}}: {{$v}}</li>{{end}}</ul>{{else}}<p class="ok">no false offline, ghost, lost event or version going back</p>{{end}}
<h2>Rounds</h2>
{{range .Rounds}}<h3>round {{.Index}}: {{.Fault}}</h3>
{{range .Notes}}<p>{{.}}</p>{{end}}
{{if .Faults}}<p>faults:{{range .Faults}} {{.At.Format "15:04:05.000"}} {{.What}}{{if .Node}} {{.Node}}{{end}};{{end}}</p>{{end}}
{{range .Findings}}<p class="bad">{{.Kind}} {{.Device}} {{.Watcher}}: {{.Detail}}</p>{{end}}
<p>{{len .Latencies}} latencies{{range .Latencies}}; {{.Device}}→{{.Watcher}} {{printf "%.0f" .Ms}} ms{{end}}</p>
{{end}}
</body></html>
`))

// holdBack is Options.HoldBack as the report says it ("": none).
func holdBack(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.String()
}
