package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/presence-im/presence/internal/pgtest"
	"github.com/presence-im/presence/store/postgres"
	"github.com/presence-im/presence/store/sqlite"
)

// StoreOptions configure `bench store`: issue 9's store under load. One
// presenced node with the store; N devices connect (an attempt floor each,
// written through before the handshake is answered), heartbeat for Steady,
// then every load process drops all of its connections at once (no close
// frame): N last-seen times follow the debounce. Every write is counted
// (the node's presence_store_writes_total) and then looked up in the
// database after the node stopped.
type StoreOptions struct {
	N           int
	Runs        int
	PerWorker   int
	Concurrency int
	Interval    time.Duration // heartbeats
	Steady      time.Duration // heartbeats only, over which the steady RSS is read
	Tail        time.Duration // RSS still watched after the last write; 0: 5 s
	Stores      []string      // "sqlite", "postgres"
	Bin, Self   string
	Dir         string
	Progress    io.Writer
}

// StoreResult is one run on one store.
type StoreResult struct {
	Store              string
	Floors, LastSeens  float64       // writes counted by the node on connect, after the drop
	ConnectT, DropT    time.Duration // first dial (the drop) to the last of those writes counted
	Commits            float64       // transactions that carried the drop's writes
	FailedOrRefused    float64       // over the run
	ConnectFailed      float64       // of them, on connect
	Lost               int           // devices whose floor or last seen is not in the database afterwards
	SteadyRSS, PeakRSS float64
	Unexpected         int64 // connections ended before the drop without the load asking
	Errors             string
}

func (so StoreOptions) bench() Options {
	o := Options{N: so.N, Nodes: 1, PerWorker: so.PerWorker, Concurrency: so.Concurrency, Interval: so.Interval,
		Bin: so.Bin, Self: so.Self, Progress: so.Progress}
	o.Defaults()
	return o
}

// RunStore measures every store Runs times, alternating them.
func RunStore(ctx context.Context, so StoreOptions) ([]StoreResult, error) {
	var out []StoreResult
	for r := range max(so.Runs, 1) {
		for _, name := range so.Stores {
			dir, err := os.MkdirTemp(so.Dir, name+"-")
			if err != nil {
				return out, err
			}
			res, err := storeOnce(ctx, so, name, dir)
			if err != nil {
				return out, fmt.Errorf("store %s run %d: %w (logs in %s)", name, r+1, err, dir)
			}
			out = append(out, res)
			so.bench().progressf("\r\033[K%s run %d/%d: %s\n", name, r+1, so.Runs, res.brief(so.N))
		}
	}
	return out, nil
}

func (r StoreResult) brief(n int) string {
	return fmt.Sprintf("%.0f floors in %.1f s, %.0f last-seens in %.1f s (%.0f commits), %.0f writes failed or refused, %d devices missing a write in the database, RSS peak/steady %.2f",
		r.Floors, r.ConnectT.Seconds(), r.LastSeens, r.DropT.Seconds(), r.Commits, r.FailedOrRefused, r.Lost, r.PeakRSS/max(r.SteadyRSS, 1))
}

// database starts the store: SQLite in dir, or a PostgreSQL server with
// its defaults (durable commits) in a directory of its own (the server's
// user must reach it: not under the run's private directory).
func database(name, dir string) (dsn string, stop func() error, err error) {
	switch name {
	case "sqlite":
		return "sqlite:" + filepath.Join(dir, "presence.db"), func() error { return nil }, nil
	case "postgres":
		pg, err := os.MkdirTemp("", "presence-bench-pg-")
		if err != nil {
			return "", nil, err
		}
		dsn, stop, err := pgtest.Server(pg)
		if err != nil {
			os.RemoveAll(pg)
			return "", nil, err
		}
		return dsn, func() error { defer os.RemoveAll(pg); return stop() }, nil
	}
	return "", nil, fmt.Errorf("bench: store %q: sqlite or postgres", name)
}

func storeOnce(ctx context.Context, so StoreOptions, name, dir string) (StoreResult, error) {
	res := StoreResult{Store: name}
	dsn, stopDB, err := database(name, dir)
	if err != nil {
		return res, err
	}
	defer func() { _ = stopDB() }()
	o := so.bench()
	o.DSN = dsn
	sys, err := startPresence(o, dir)
	if err != nil {
		return res, err
	}
	defer sys.Stop()
	p := sys.(*presenceSys)
	t0 := time.Now()
	ws, err := connect(o, sys, dir, &RunResult{})
	if ws != nil {
		defer stopWorkers(ws)
	}
	if err != nil {
		return res, err
	}
	if err := storeRun(ctx, so, p, ws, &res, t0); err != nil {
		return res, err
	}
	p.Stop()
	res.Lost, err = lostWrites(ctx, dsn, so.N)
	return res, err
}

// storeRun: the floors, the steady state, the drop and its writes.
func storeRun(ctx context.Context, so StoreOptions, p *presenceSys, ws []*workerProc, res *StoreResult, t0 time.Time) error {
	o := so.bench()
	w, at, err := p.awaitWrites(ctx, float64(so.N), 2*time.Minute)
	res.Floors, res.ConnectT = w, at.Sub(t0)
	f0, _ := p.metrics("presence_store_")
	if err != nil {
		return err
	}
	o.progressf("\r\033[K%s steady %v", p.Name(), so.Steady)
	steady := sampleRSS(ctx, p.Pids()[0], so.Steady, 250*time.Millisecond)
	slices.Sort(steady)
	res.SteadyRSS = steady[len(steady)/2]
	st, err := collectStats(ws)
	if err != nil {
		return err
	}
	res.Unexpected, res.Errors = st.unexpected, strings.Join(st.errs, " | ")
	c0, _ := p.metrics("presence_store_batch_writes_count")
	o.progressf("\r\033[K%s drop %d devices", p.Name(), so.N)
	td := time.Now()
	peak := make(chan float64, 1)
	sctx, stop := context.WithCancel(ctx)
	go func() { peak <- maxOf(sampleRSS(sctx, p.Pids()[0], 10*time.Minute, 100*time.Millisecond)) }()
	if err := eachWorker(ws, func(w *workerProc) error { _, err := w.ask("drop", "dropped", time.Minute); return err }); err != nil {
		stop()
		return err
	}
	w, at, err = p.awaitWrites(ctx, float64(2*so.N), 5*time.Minute)
	res.LastSeens, res.DropT = w-res.Floors, at.Sub(td) // until each write was written, failed or refused
	time.Sleep(cmp.Or(so.Tail, 5*time.Second))          // the collector's and the allocator's after-effects
	stop()
	res.PeakRSS = <-peak
	c1, _ := p.metrics("presence_store_")
	res.Commits = sum(c1, "presence_store_batch_writes_count") - sum(c0, "presence_store_batch_writes_count")
	failed := func(m map[string]float64) float64 {
		return sum(m, "presence_store_write_failures_total") + sum(m, "presence_store_writes_refused_total")
	}
	res.FailedOrRefused, res.ConnectFailed = failed(c1), failed(f0)
	return err
}

// awaitWrites polls the node's write counters until the writes written,
// failed and refused (a full queue: the write is lost) reach want: the
// count written and when it was read.
func (s *presenceSys) awaitWrites(ctx context.Context, want float64, within time.Duration) (float64, time.Time, error) {
	deadline := time.Now().Add(within)
	for {
		m, err := s.metrics("presence_store_")
		n := sum(m, "presence_store_writes_total")
		if err == nil && n+sum(m, "presence_store_write_failures_total")+sum(m, "presence_store_writes_refused_total") >= want {
			return n, time.Now(), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return n, time.Now(), fmt.Errorf("bench: %.0f of %.0f store writes within %v (%v)", n, want, within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sum adds the samples of the metric name, whatever their labels.
func sum(m map[string]float64, name string) float64 {
	var t float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			t += v
		}
	}
	return t
}

// sampleRSS reads pid's RSS every step for d (or until ctx ends).
func sampleRSS(ctx context.Context, pid int, d, step time.Duration) []float64 {
	var out []float64
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		if v, err := rss(pid); err == nil {
			out = append(out, v)
		}
		select {
		case <-ctx.Done():
		case <-time.After(step):
		}
	}
	return out
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

// lostWrites counts the devices bench000000.. whose attempt floor or user
// last seen is not in the database.
func lostWrites(ctx context.Context, dsn string, n int) (int, error) {
	type history interface {
		Floor(ctx context.Context, user, device string) (uint64, error)
		LastSeen(ctx context.Context, user string) (time.Time, error)
	}
	var h history
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		s, err := sqlite.Open(path)
		if err != nil {
			return 0, err
		}
		defer s.Close()
		h = s
	} else {
		s, err := postgres.Open(ctx, dsn)
		if err != nil {
			return 0, err
		}
		defer s.Close()
		h = s
	}
	lost := 0
	for _, u := range users(0, n) {
		f, err1 := h.Floor(ctx, u, "d")
		at, err2 := h.LastSeen(ctx, u)
		if f == 0 || at.IsZero() || err1 != nil || err2 != nil {
			lost++
		}
	}
	return lost, nil
}

// ReportStore writes the store table: min / median / max over the runs of
// each store, and issue 9's targets (nothing lost, RSS within 1.2x of the
// steady state) met or missed by the worst run.
func ReportStore(w io.Writer, so StoreOptions, machine string, results []StoreResult) {
	fmt.Fprintf(w, "machine: %s\n", machine)
	fmt.Fprintf(w, "workload: %d devices on one presenced, heartbeats every %v, %v steady, then every connection dropped at once (the last-seen writes follow the %v debounce); %d runs of each store (min / median / max)\n\n",
		so.N, so.Interval, so.Steady, so.bench().Debounce, so.Runs)
	fmt.Fprintf(w, "| | %s | target |\n|---|%s---|\n", strings.Join(so.Stores, " | "), strings.Repeat("---|", len(so.Stores)))
	mib := func(v float64) float64 { return v / (1 << 20) }
	rows := []struct {
		name, unit string
		get        func(StoreResult) float64
		target     string
		ok         func(float64) bool
	}{
		{"attempt floors written on connect", "", func(r StoreResult) float64 { return r.Floors }, "", nil},
		{"first dial to the last floor written", "s", func(r StoreResult) float64 { return r.ConnectT.Seconds() }, "", nil},
		{"last-seen times written after the drop", "", func(r StoreResult) float64 { return r.LastSeens }, "", nil},
		{"drop to the last last-seen written (or refused)", "s", func(r StoreResult) float64 { return r.DropT.Seconds() }, "", nil},
		{"transactions carrying them", "", func(r StoreResult) float64 { return r.Commits }, "", nil},
		{"writes failed or refused on connect", "", func(r StoreResult) float64 { return r.ConnectFailed }, "0", func(v float64) bool { return v == 0 }},
		{"writes failed or refused after the drop", "", func(r StoreResult) float64 { return r.FailedOrRefused - r.ConnectFailed }, "0", func(v float64) bool { return v == 0 }},
		{"devices missing a write in the database", "", func(r StoreResult) float64 { return float64(r.Lost) }, "0", func(v float64) bool { return v == 0 }},
		{"RSS, steady (heartbeats flowing)", "MiB", func(r StoreResult) float64 { return mib(r.SteadyRSS) }, "", nil},
		{fmt.Sprintf("RSS, peak from the drop to %v after its last write", cmp.Or(so.Tail, 5*time.Second)), "MiB", func(r StoreResult) float64 { return mib(r.PeakRSS) }, "", nil},
		{"RSS peak / steady", "x", func(r StoreResult) float64 { return r.PeakRSS / max(r.SteadyRSS, 1) }, "<= 1.2", func(v float64) bool { return v <= 1.2 }},
	}
	for _, r := range rows {
		var cells []string
		met := true
		for _, s := range so.Stores {
			var xs []float64
			for _, res := range results {
				if res.Store == s {
					xs = append(xs, r.get(res))
					met = met && (r.ok == nil || r.ok(r.get(res)))
				}
			}
			lo, med, hi := spread(xs)
			cells = append(cells, fmt.Sprintf("%s / %s / %s %s", num(lo), num(med), num(hi), r.unit))
		}
		verdict := r.target
		if r.ok != nil {
			verdict += map[bool]string{true: ": met", false: ": **missed**"}[met]
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", r.name, strings.Join(cells, " | "), verdict)
	}
	fmt.Fprintln(w)
	for _, r := range results {
		fmt.Fprintf(w, "%s: %s; connections ended before the drop nobody asked for %d\n", r.Store, r.brief(so.N), r.Unexpected)
		if r.Errors != "" {
			fmt.Fprintf(w, "  first errors: %s\n", r.Errors)
		}
	}
}
