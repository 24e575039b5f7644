package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/config"
)

// StormOptions are the storm bench's (make bench-storm): one presenced
// node (or Nodes, the devices spread over them), N devices of N users heartbeating, each subscribed to the R users
// after it in real time and the B after those batched (seed 004's user
// with a friend list, scaled to the machine); a login wave: Frac of the
// users leave at once and come back after Away, subscribing again. Each
// run goes once tiered and once with every subscription in real time (what
// merging saves).
type StormOptions struct {
	Options
	R, B int
	Frac float64
	Away time.Duration
	// Degrade, when its At is set, is passed to presenced (--degrade-at,
	// --degrade-below, --restore-after, --degraded-pull; a zero field
	// keeps presenced's default): a tiny At forces degraded mode, as the
	// storm smoke test does.
	Degrade config.Degrade
}

// nodeArgs are the storm's presenced flags beside o.NodeArgs.
func (o StormOptions) nodeArgs() []string {
	args := slices.Clone(o.NodeArgs)
	if o.Degrade.At <= 0 {
		return args
	}
	args = append(args, "--degrade-at", o.Degrade.At.String())
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"--degrade-below", o.Degrade.Below}, {"--restore-after", o.Degrade.RestoreAfter}, {"--degraded-pull", o.Degrade.Pull}} {
		if f.d > 0 {
			args = append(args, f.name, f.d.String())
		}
	}
	return args
}

// StormResult is one wave's figures.
type StormResult struct {
	Tiered bool
	// RealtimeOffline are the realtime subscribers' offline events of the
	// departed users: receive time minus the wave.
	RealtimeOffline []time.Duration
	// BatchedSettle is when a batched contact's held status last changed
	// after the last device came back, from that moment, whatever brought
	// it (a presence_batch, a query's answer, the restored snapshot): the
	// batched tier's final state.
	BatchedSettle time.Duration
	// Frames are every frame but heartbeat acks the devices received from
	// the wave on, and by kind (frameKind); Presences the presences they
	// carried.
	Frames       int64
	FramesByKind map[string]int64
	Presences    int64
	// Regressions are presences received with a version below the one the
	// device held for their target (the wire's versions, before the
	// filter the SDKs apply).
	Regressions int64
	// Converged is when every device held every contact online again and
	// no node was degraded, from the last return (0: not within
	// stormMaxWait).
	Converged time.Duration
	// Wrong are the contacts, over every device, held otherwise than the
	// truth the nodes answer (POST /api/presence/batch) when the bench
	// stopped waiting, or not held at all (Missing of them).
	Wrong, Missing int
	Degraded       float64
	DegradedFor    time.Duration
	DegradedAtEnd  float64 // nodes still degraded when the bench stopped waiting
	// Unexpected are the connections that ended without the bench asking,
	// Codes their close codes (-1: none) and Errors the first of them.
	Unexpected    int64
	Codes, Errors string
	RSSSteady     float64
	RSSPeak       float64
	BoundMs       float64 // graceful_close_ms: the realtime bound
	WindowMs      float64
}

// RunStorm runs the storm Runs times, alternating tiered and realtime.
func RunStorm(ctx context.Context, o StormOptions) ([]StormResult, error) {
	o.Defaults()
	o.Systems = []string{"presence"}
	var out []StormResult
	for r := range o.Runs {
		for _, tiered := range []bool{true, false} {
			dir, err := os.MkdirTemp(o.Dir, "storm-")
			if err != nil {
				return out, err
			}
			res, err := stormOnce(ctx, o, tiered, dir)
			if err != nil {
				return out, fmt.Errorf("storm run %d (tiered %v): %w (logs in %s)", r+1, tiered, err, dir)
			}
			out = append(out, res)
			o.progressf("\r\033[Kstorm run %d/%d (tiered %v) done\n", r+1, o.Runs, tiered)
		}
	}
	return out, nil
}

func stormOnce(ctx context.Context, o StormOptions, tiered bool, dir string) (StormResult, error) {
	res := StormResult{Tiered: tiered}
	po := o.Options
	po.NodeArgs = o.nodeArgs()
	sysI, err := startPresence(po, dir)
	if err != nil {
		return res, err
	}
	sys := sysI.(*presenceSys)
	defer sys.Stop()
	b, err := sys.bounds()
	if err != nil {
		return res, err
	}
	res.BoundMs, res.WindowMs = float64(b.GracefulCloseMs), float64(b.Timing.BatchWindowMs)
	if err := stormPolicies(o, sys); err != nil {
		return res, err
	}
	var rr RunResult
	ws, err := connect(o.Options, sys, dir, &rr)
	if ws != nil {
		defer stopWorkers(ws)
	}
	if err != nil {
		return res, err
	}
	time.Sleep(time.Until(sys.Settled())) // a cluster's views, settled (docs/bounds.md)
	t := map[bool]string{true: "1", false: "0"}[tiered]
	if err := eachWorker(ws, func(w *workerProc) error {
		f, err := w.ask(fmt.Sprintf("contacts %d %d %d %s", o.N, o.R, o.B, t), "contacts", 5*time.Minute)
		if err == nil && f[0] != strconv.Itoa(w.count) {
			err = fmt.Errorf("bench: %s of %d devices subscribed", f[0], w.count)
		}
		return err
	}); err != nil {
		return res, err
	}
	time.Sleep(2 * time.Second) // the snapshots answered, a steady reading
	res.RSSSteady, _ = rss(sys.Pids()...)
	peak := sampleRSSPeak(sys.Pids())
	back, err := stormWave(o, ws)
	if err != nil {
		return res, err
	}
	if err := stormConverge(sys, ws, back, &res); err != nil {
		return res, err
	}
	res.RSSPeak = peak()
	return res, stormEnd(o, sys, ws, dir, &res)
}

// stormEnd takes the wave's last figures: the truth check, the
// connections cut, and the nodes' degraded mode.
func stormEnd(o StormOptions, sys *presenceSys, ws []*workerProc, dir string, res *StormResult) error {
	if err := stormTruth(o, sys, ws, dir, res); err != nil {
		return err
	}
	st, err := collectStats(ws)
	if err != nil {
		return err
	}
	res.Unexpected, res.Codes, res.Errors = st.unexpected, codesString(st.codes), strings.Join(st.errs, " | ")
	m, err := sys.metrics("presence_degraded")
	if err != nil {
		return err
	}
	res.Degraded, res.DegradedFor = sum(m, "presence_degraded_connections_total"), time.Duration(sum(m, "presence_degraded_seconds_total")*float64(time.Second))
	res.DegradedAtEnd = sum(m, "presence_degraded")
	return nil
}

// stormWave has every load process send its departed devices away and
// back, and returns when the last one came back (Unix ns).
func stormWave(o StormOptions, ws []*workerProc) (int64, error) {
	wave := time.Now()
	back := int64(0)
	var mu sync.Mutex
	o.progressf("\r\033[Kstorm: %d%% of %d users leave, back after %v", int(o.Frac*100), o.N, o.Away)
	err := eachWorker(ws, func(w *workerProc) error {
		f, err := w.ask(fmt.Sprintf("wave %d %g %s", wave.UnixNano(), o.Frac, o.Away), "waved", 5*time.Minute)
		if err != nil {
			return err
		}
		if f[1] != "0" {
			return fmt.Errorf("bench: %s departed devices of a load process did not come back subscribed", f[1])
		}
		ns, _ := strconv.ParseInt(f[0], 10, 64)
		mu.Lock()
		back = max(back, ns)
		mu.Unlock()
		return nil
	})
	if err != nil {
		if st, serr := collectStats(ws); serr == nil && len(st.errs) > 0 {
			err = fmt.Errorf("%w (first errors: %s)", err, strings.Join(st.errs, " | "))
		}
	}
	return back, err
}

// stormMaxWait bounds how long the bench waits, after the last return,
// for every device to hold every contact online and every node to push
// again.
const stormMaxWait = 2 * time.Minute

// stormConverge reads the workers every second until every device holds
// every contact online and no node is degraded (or stormMaxWait after the
// last return), then takes their figures.
func stormConverge(sys *presenceSys, ws []*workerProc, back int64, res *StormResult) error {
	for {
		time.Sleep(time.Second)
		r, _, err := stormRead(ws)
		if err != nil {
			return err
		}
		m, err := sys.metrics("presence_degraded")
		if err != nil {
			return err
		}
		since := time.Since(time.Unix(0, back))
		done := r.Wrong == 0 && sum(m, "presence_degraded") == 0
		if done {
			res.Converged = since
		}
		if done || since > stormMaxWait {
			break
		}
	}
	time.Sleep(time.Second) // a restore's frames, written as the gauge fell, on their way
	r, lastBatched, err := stormRead(ws)
	if err != nil {
		return err
	}
	res.Frames, res.FramesByKind, res.Presences, res.Regressions = r.Frames, r.FramesByKind, r.Presences, r.Regressions
	res.RealtimeOffline = r.RealtimeOffline
	if lastBatched > back {
		res.BatchedSettle = time.Duration(lastBatched - back)
	}
	return nil
}

// stormRead sums the workers' storm lines; Wrong counts the contacts not
// held online (the truth once every device is back).
func stormRead(ws []*workerProc) (StormResult, int64, error) {
	r := StormResult{FramesByKind: map[string]int64{}}
	var mu sync.Mutex
	var lastBatched int64
	err := eachWorker(ws, func(w *workerProc) error {
		f, err := w.ask("storm", "storm", time.Minute)
		if err != nil {
			return err
		}
		if len(f) < 6 {
			return fmt.Errorf("bench: storm line %q", f)
		}
		lb, _ := strconv.ParseInt(f[0], 10, 64)
		wrong, _ := strconv.Atoi(f[1])
		regressions, _ := strconv.ParseInt(f[2], 10, 64)
		presences, _ := strconv.ParseInt(f[3], 10, 64)
		mu.Lock()
		defer mu.Unlock()
		for _, kv := range strings.Split(f[4], ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				r.FramesByKind[k] += n
				r.Frames += n
			}
		}
		for _, s := range strings.Split(f[5], ",") {
			if us, err := strconv.ParseInt(s, 10, 64); err == nil {
				r.RealtimeOffline = append(r.RealtimeOffline, time.Duration(us)*time.Microsecond)
			}
		}
		r.Wrong += wrong
		r.Regressions += regressions
		r.Presences += presences
		lastBatched = max(lastBatched, lb)
		return nil
	})
	return r, lastBatched, err
}

// stormTruth reads every user's status from the nodes (POST
// /api/presence/batch), and has the workers count the contacts their
// devices hold otherwise, or not at all.
func stormTruth(o StormOptions, sys *presenceSys, ws []*workerProc, dir string, res *StormResult) error {
	var b strings.Builder
	for first := 0; first < o.N; first += stormTruthChunk {
		us, err := sys.statuses(users(first, min(stormTruthChunk, o.N-first)))
		if err != nil {
			return err
		}
		for _, u := range us {
			fmt.Fprintf(&b, "%s %s\n", u.User, u.Status)
		}
	}
	file := filepath.Join(dir, "truth")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		return err
	}
	var mu sync.Mutex
	res.Wrong, res.Missing = 0, 0
	return eachWorker(ws, func(w *workerProc) error {
		f, err := w.ask("truth "+file, "truth", time.Minute)
		if err != nil {
			return err
		}
		wrong, err1 := strconv.Atoi(f[0])
		missing, err2 := strconv.Atoi(f[1])
		if err := cmp.Or(err1, err2); err != nil || wrong < 0 {
			return fmt.Errorf("bench: truth %q: %v", f, err)
		}
		mu.Lock()
		defer mu.Unlock()
		res.Wrong += wrong
		res.Missing += missing
		return nil
	})
}

// stormTruthChunk is the users of one truth request: presenced's default
// --max-batch.
const stormTruthChunk = 1000

// statuses is POST /api/presence/batch's answer for users, from the first
// node: each user's status as the nodes hold it.
func (s *presenceSys) statuses(users []string) ([]struct{ User, Status string }, error) {
	body, _ := json.Marshal(map[string][]string{"users": users})
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.admin[0]+"/api/presence/batch", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var out struct {
		Users []struct{ User, Status string } `json:"users"`
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return nil, fmt.Errorf("bench: POST /api/presence/batch: %s: %s", res.Status, b)
	}
	err = json.NewDecoder(res.Body).Decode(&out)
	return out.Users, err
}

// stormPolicies lets each user's subscribers (the R+B users before it)
// see it, 8 requests at a time.
func stormPolicies(o StormOptions, sys *presenceSys) error {
	o.progressf("\r\033[Kstorm: %d policies", o.N)
	sem := make(chan struct{}, 8)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for u := range o.N {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var subs []string
			for k := 1; k <= o.R+o.B; k++ {
				subs = append(subs, fmt.Sprintf("bench%06d", (u-k+o.N)%o.N))
			}
			if err := sys.Allow(fmt.Sprintf("bench%06d", u), subs); err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// sampleRSSPeak reads the nodes' RSS (summed) every 100 ms until the
// returned function is called, which returns the peak.
func sampleRSSPeak(pids []int) func() float64 {
	stop := make(chan struct{})
	done := make(chan float64, 1)
	go func() {
		p := 0.0
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if r, err := rss(pids...); err == nil {
				p = max(p, r)
			}
			select {
			case <-stop:
				done <- p
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 { close(stop); return <-done }
}

// StormReport writes the storm's table: min / median / max over the runs
// of each mode, and each target met or missed.
func StormReport(w io.Writer, o StormOptions, machine string, rs []StormResult) {
	o.Defaults()
	fmt.Fprintf(w, "machine: %s\n", machine)
	fmt.Fprintf(w, "storm: %d presenced node(s), %d devices (users), each subscribed to %d users in real time and %d batched; %.0f%% leave at once and come back after %v; %d runs, each tiered then realtime only\n\n",
		max(o.Nodes, 1), o.N, o.R, o.B, o.Frac*100, o.Away, o.Runs)
	var tiered, rt []StormResult
	for _, r := range rs {
		if r.Tiered {
			tiered = append(tiered, r)
		} else {
			rt = append(rt, r)
		}
	}
	fmt.Fprintln(w, "| per wave | tiered | realtime only | target |\n|---|---|---|---|")
	for _, row := range stormRows(rs) {
		cell := func(xs []StormResult) string {
			if row.tieredOnly && len(xs) > 0 && !xs[0].Tiered {
				return ""
			}
			return stormCol(xs, row.f)
		}
		target, judged := row.target, rs
		if row.tieredOnly || row.judgeTiered {
			judged = tiered
		}
		if row.ok != nil {
			target += ": " + verdictStorm(judged, row.ok)
		}
		if row.verdict != nil {
			target += ": " + row.verdict(tiered, rt)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", row.name, cell(tiered), cell(rt), target)
	}
}

// stormRow is one row of the storm's table: its figure of a wave, its
// target, and the check of each run (ok) or of the modes (verdict).
type stormRow struct {
	name, target string
	f            func(StormResult) float64
	tieredOnly   bool // no realtime-only figure; judged on the tiered waves
	judgeTiered  bool // judged on the tiered waves
	ok           func(StormResult) bool
	verdict      func(tiered, rt []StormResult) string
}

// stormCol is min / median / max of f over xs.
func stormCol(xs []StormResult, f func(StormResult) float64) string {
	if len(xs) == 0 {
		return ""
	}
	var v []float64
	for _, x := range xs {
		v = append(v, f(x))
	}
	lo, med, hi := spread(v)
	return fmt.Sprintf("%s / %s / %s", num(lo), num(med), num(hi))
}

// stormRows are the storm table's rows.
func stormRows(rs []StormResult) []stormRow {
	bound, window := 0.0, 0.0
	if len(rs) > 0 {
		bound, window = rs[0].BoundMs, rs[0].WindowMs
	}
	q := func(p float64) func(StormResult) float64 {
		return func(r StormResult) float64 { return float64(quantile(slices.Clone(r.RealtimeOffline), p)) / 1e6 }
	}
	settle := func(r StormResult) float64 { return float64(r.BatchedSettle) / 1e6 }
	rows := []stormRow{
		{name: "realtime offline latency p50, ms", f: q(0.5)},
		{name: "realtime offline latency p99, ms", f: q(0.99), target: fmt.Sprintf("<= %.0f (graceful_close)", bound), judgeTiered: true, ok: func(r StormResult) bool { return q(0.99)(r) <= bound }},
		{name: "batched contacts' final state after the last return (batch, query answer or restored snapshot), ms", f: settle, tieredOnly: true,
			target: fmt.Sprintf("<= %.0f (window + graceful_close)", window+bound), ok: func(r StormResult) bool { return settle(r) <= window+bound }},
		{name: "frames received from the wave on (every kind but heartbeat acks)", f: func(r StormResult) float64 { return float64(r.Frames) }, target: "tiered <= 1/3 of realtime only", verdict: framesVerdict},
	}
	for _, k := range stormKinds {
		rows = append(rows, stormRow{name: "... of which " + k, f: func(r StormResult) float64 { return float64(r.FramesByKind[k]) }})
	}
	return append(rows,
		stormRow{name: "presences those frames carried", f: func(r StormResult) float64 { return float64(r.Presences) }},
		stormRow{name: "connections degraded", f: func(r StormResult) float64 { return r.Degraded }},
		stormRow{name: "time degraded, s", f: func(r StormResult) float64 { return r.DegradedFor.Seconds() }},
		stormRow{name: "peak RSS / steady RSS", f: rssRatio, target: "<= 1.30", ok: func(r StormResult) bool { return rssRatio(r) <= 1.3 }},
		stormRow{name: "every contact held online and push restored, s after the last return (reads every 1 s)", f: func(r StormResult) float64 { return r.Converged.Seconds() },
			target: fmt.Sprintf("within %v", stormMaxWait), ok: func(r StormResult) bool { return r.Converged > 0 }},
		stormRow{name: "contacts held otherwise than the nodes' truth, or not held", f: func(r StormResult) float64 { return float64(r.Wrong) }, target: "0", ok: func(r StormResult) bool { return r.Wrong == 0 }},
		stormRow{name: "... of which not held", f: func(r StormResult) float64 { return float64(r.Missing) }},
		stormRow{name: "connections ended that the bench did not end", f: func(r StormResult) float64 { return float64(r.Unexpected) }, target: "0", ok: func(r StormResult) bool { return r.Unexpected == 0 }},
		stormRow{name: "presences received with a version below the one held", f: func(r StormResult) float64 { return float64(r.Regressions) }, target: "0", ok: func(r StormResult) bool { return r.Regressions == 0 }},
	)
}

func rssRatio(r StormResult) float64 {
	if r.RSSSteady == 0 {
		return 0
	}
	return r.RSSPeak / r.RSSSteady
}

// verdictStorm is "met" when ok holds for every run, else how many missed.
func verdictStorm(rs []StormResult, ok func(StormResult) bool) string {
	missed := 0
	for _, r := range rs {
		if !ok(r) {
			missed++
		}
	}
	if missed == 0 {
		return "met"
	}
	return fmt.Sprintf("**missed** in %d of %d runs", missed, len(rs))
}

// framesVerdict compares the medians of the frames received.
func framesVerdict(tiered, rt []StormResult) string {
	med := func(xs []StormResult) float64 {
		var v []float64
		for _, x := range xs {
			v = append(v, float64(x.Frames))
		}
		_, m, _ := spread(v)
		return m
	}
	if med(rt) == 0 {
		return "no frames"
	}
	r := med(tiered) / med(rt)
	if r <= 1.0/3 {
		return fmt.Sprintf("met (%.2f)", r)
	}
	return fmt.Sprintf("**missed** (%.2f)", r)
}

// bounds is the node's GET /api/bounds.
func (s *presenceSys) bounds() (admin.Bounds, error) {
	var b admin.Bounds
	res, err := s.get(http.DefaultClient, "/api/bounds")
	if err != nil {
		return b, err
	}
	defer res.Body.Close()
	return b, json.NewDecoder(res.Body).Decode(&b)
}
