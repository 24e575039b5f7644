package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fanout makes the devices of the first Subs users subscribe to one more user, then
// closes that user's one device Rounds times: each subscriber's latency is
// its receive time minus the close minus the system's debounce (what the
// design waits on purpose).
func fanout(ctx context.Context, o Options, sys system, ws []*workerProc, res *RunResult) error {
	if err := ctx.Err(); err != nil { // stopped: not even the subscribers
		return err
	}
	if err := eachWorker(ws, func(w *workerProc) error {
		k := min(max(o.Subs-w.first, 0), w.count)
		if k == 0 {
			return nil
		}
		f, err := w.ask(fmt.Sprintf("sub %s %d", target, k), "subscribed", cfSubscribeWithin+time.Minute)
		if err == nil && f[0] != strconv.Itoa(k) {
			err = fmt.Errorf("bench: %s of %d subscribers got a snapshot", f[0], k)
		}
		return err
	}); err != nil {
		return err
	}
	if c, ok := sys.(interface{ Settled() time.Time }); ok && time.Until(c.Settled()) > 0 {
		o.progressf("\r\033[K%s: waiting %v for the cluster's views to settle", sys.Name(), time.Until(c.Settled()).Round(time.Second))
		time.Sleep(time.Until(c.Settled()))
	}
	t := ws[0]
	if p, ok := sys.(*presenceSys); ok && o.Profile != "" {
		// The rounds, about 4 s each: the fan-out's share of the node's CPU
		// (go tool pprof -focus on the fan-out's functions; the heartbeats
		// of the N devices run meanwhile).
		go p.profile(time.Duration(o.Rounds)*4*time.Second, filepath.Join(o.Profile, fmt.Sprintf("fanout-cpu-%d.pprof", time.Now().Unix())))
	}
	for round := range o.Rounds {
		if err := ctx.Err(); err != nil { // stopped: no more rounds
			return err
		}
		o.progressf("\r\033[K%s fan-out round %d/%d", sys.Name(), round+1, o.Rounds)
		if _, err := t.ask("open "+target, "opened", time.Minute); err != nil {
			return err
		}
		// The online is published at once; let it reach every subscriber.
		time.Sleep(time.Second)
		if _, err := collectLatencies(ws, 0, time.Second, 0); err != nil {
			return err
		}
		f, err := t.ask("close", "closed", time.Minute)
		if err != nil {
			return err
		}
		closed, _ := strconv.ParseInt(f[0], 10, 64)
		recv, err := collectLatencies(ws, o.Subs*o.Devices, sys.Debounce()+30*time.Second, 100*time.Millisecond)
		if err != nil {
			return err
		}
		for _, at := range recv {
			res.Fanout = append(res.Fanout, time.Duration(at-closed)-sys.Debounce())
		}
		o.progressf("\r\033[K%s fan-out round %d: %d of %d events\n", sys.Name(), round+1, len(recv), o.Subs*o.Devices)
		res.FanoutExpected += o.Subs * o.Devices
	}
	o.progressf("\r\033[K")
	return nil
}

// collectLatencies gathers the workers' receive times until want arrived
// or within passed.
func collectLatencies(ws []*workerProc, want int, within, every time.Duration) ([]int64, error) {
	var all []int64
	deadline := time.Now().Add(within)
	for {
		for _, w := range ws {
			f, err := w.ask("lat", "lat", time.Minute)
			if err != nil {
				return all, err
			}
			if len(f) > 1 {
				for _, s := range strings.Split(f[1], ",") {
					v, _ := strconv.ParseInt(s, 10, 64)
					all = append(all, v)
				}
			}
		}
		if len(all) >= want || time.Now().After(deadline) {
			return all, nil
		}
		time.Sleep(every)
	}
}

// eachWorker runs f on every worker at once and returns the first error.
func eachWorker(ws []*workerProc, f func(*workerProc) error) error {
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() { errs[i] = f(w) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
