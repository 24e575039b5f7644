package loadbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/presence-im/presence/admin"
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
}

// StormResult is one wave's figures.
type StormResult struct {
	Tiered bool
	// RealtimeOffline are the realtime subscribers' offline events of the
	// departed users: receive time minus the wave.
	RealtimeOffline []time.Duration
	// BatchedSettle is the last presence_batch received after the last
	// device came back, from that moment (the batched tier's final state).
	BatchedSettle time.Duration
	Frames        int64 // change frames received: presence and presence_batch
	// Converged is when every device held every contact online again, from
	// the last return; Wrong the contacts not held online when the bench
	// stopped waiting (stormConverge) without that.
	Converged   time.Duration
	Wrong       int
	Degraded    float64
	DegradedFor time.Duration
	RSSSteady   float64
	RSSPeak     float64
	BoundMs     float64 // graceful_close_ms: the realtime bound
	WindowMs    float64
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
	sysI, err := startPresence(o.Options, dir)
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
			err = fmt.Errorf("loadbench: %s of %d devices subscribed", f[0], w.count)
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
	if err := stormConverge(ws, back, &res); err != nil {
		return res, err
	}
	res.RSSPeak = peak()
	m, err := sys.metrics("presence_degraded_")
	if err != nil {
		return res, err
	}
	res.Degraded, res.DegradedFor = sum(m, "presence_degraded_connections_total"), time.Duration(sum(m, "presence_degraded_seconds_total")*float64(time.Second))
	return res, nil
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
		if err == nil {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			mu.Lock()
			back = max(back, ns)
			mu.Unlock()
		}
		return err
	})
	return back, err
}

// stormMaxWait bounds how long the bench waits, after the last return,
// for every device to hold every contact online again.
const stormMaxWait = 2 * time.Minute

// stormConverge reads the workers every second until every device holds
// every contact online (or stormMaxWait after the last return), then
// takes their figures.
func stormConverge(ws []*workerProc, back int64, res *StormResult) error {
	for {
		time.Sleep(time.Second)
		r := StormResult{Tiered: res.Tiered}
		var mu sync.Mutex
		var lastBatch int64
		err := eachWorker(ws, func(w *workerProc) error {
			f, err := w.ask("storm", "storm", time.Minute)
			if err != nil {
				return err
			}
			rt, _ := strconv.ParseInt(f[0], 10, 64)
			batches, _ := strconv.ParseInt(f[1], 10, 64)
			lb, _ := strconv.ParseInt(f[3], 10, 64)
			wrong, _ := strconv.Atoi(f[4])
			var lats []time.Duration
			for _, s := range strings.Split(strings.Join(f[5:], ""), ",") {
				if us, err := strconv.ParseInt(s, 10, 64); err == nil {
					lats = append(lats, time.Duration(us)*time.Microsecond)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			r.Frames += rt + batches
			r.Wrong += wrong
			lastBatch = max(lastBatch, lb)
			r.RealtimeOffline = append(r.RealtimeOffline, lats...)
			return nil
		})
		if err != nil {
			return err
		}
		since := time.Since(time.Unix(0, back))
		if r.Wrong == 0 || since > stormMaxWait {
			res.Frames, res.Wrong, res.RealtimeOffline = r.Frames, r.Wrong, r.RealtimeOffline
			if lastBatch > back {
				res.BatchedSettle = time.Duration(lastBatch - back)
			}
			if r.Wrong == 0 {
				res.Converged = since
			}
			return nil
		}
	}
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
	col := func(xs []StormResult, f func(StormResult) float64) string {
		var v []float64
		for _, x := range xs {
			v = append(v, f(x))
		}
		lo, med, hi := spread(v)
		return fmt.Sprintf("%s / %s / %s", num(lo), num(med), num(hi))
	}
	q := func(p float64) func(StormResult) float64 {
		return func(r StormResult) float64 { return float64(quantile(slices.Clone(r.RealtimeOffline), p)) / 1e6 }
	}
	fmt.Fprintln(w, "| per wave | tiered | realtime only | target |\n|---|---|---|---|")
	bound, window := 0.0, 0.0
	if len(rs) > 0 {
		bound, window = rs[0].BoundMs, rs[0].WindowMs
	}
	fmt.Fprintf(w, "| realtime offline latency p50, ms | %s | %s | |\n", col(tiered, q(0.5)), col(rt, q(0.5)))
	fmt.Fprintf(w, "| realtime offline latency p99, ms | %s | %s | <= %.0f (graceful_close): %s |\n", col(tiered, q(0.99)), col(rt, q(0.99)), bound, verdictStorm(tiered, func(r StormResult) bool { return q(0.99)(r) <= bound }))
	fmt.Fprintf(w, "| batched final state after the last return, ms | %s | | <= %.0f (window + graceful_close): %s |\n",
		col(tiered, func(r StormResult) float64 { return float64(r.BatchedSettle) / 1e6 }), window+bound, verdictStorm(tiered, func(r StormResult) bool { return float64(r.BatchedSettle)/1e6 <= window+bound }))
	fmt.Fprintf(w, "| change frames received | %s | %s | tiered <= 1/3 of realtime only: %s |\n", col(tiered, func(r StormResult) float64 { return float64(r.Frames) }),
		col(rt, func(r StormResult) float64 { return float64(r.Frames) }), framesVerdict(tiered, rt))
	fmt.Fprintf(w, "| connections degraded | %s | %s | |\n", col(tiered, func(r StormResult) float64 { return r.Degraded }), col(rt, func(r StormResult) float64 { return r.Degraded }))
	fmt.Fprintf(w, "| time degraded, s | %s | %s | |\n", col(tiered, func(r StormResult) float64 { return r.DegradedFor.Seconds() }), col(rt, func(r StormResult) float64 { return r.DegradedFor.Seconds() }))
	fmt.Fprintf(w, "| peak RSS / steady RSS | %s | %s | <= 1.30: %s |\n", col(tiered, rssRatio), col(rt, rssRatio), verdictStorm(rs, func(r StormResult) bool { return rssRatio(r) <= 1.3 }))
	fmt.Fprintf(w, "| every contact held online again, s after the last return (reads every 1 s) | %s | %s | |\n",
		col(tiered, func(r StormResult) float64 { return r.Converged.Seconds() }), col(rt, func(r StormResult) float64 { return r.Converged.Seconds() }))
	fmt.Fprintf(w, "| contacts not held online after %v | %s | %s | 0: %s |\n", stormMaxWait, col(tiered, func(r StormResult) float64 { return float64(r.Wrong) }),
		col(rt, func(r StormResult) float64 { return float64(r.Wrong) }), verdictStorm(rs, func(r StormResult) bool { return r.Wrong == 0 }))
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
