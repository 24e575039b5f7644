package bench

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
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
	if p, ok := sys.(*presenceSys); ok && o.Profile != "" {
		// The rounds, about 4 s each: the fan-out's share of the node's CPU
		// (go tool pprof -focus on the fan-out's functions; the heartbeats
		// of the N devices run meanwhile).
		go p.profile(time.Duration(o.Rounds)*4*time.Second, filepath.Join(o.Profile, fmt.Sprintf("fanout-cpu-%d.pprof", time.Now().Unix())))
	}
	var cost fanCost
	defer func() { res.FanoutCost = cost.perEvent() }()
	for round := range o.Rounds {
		if err := ctx.Err(); err != nil { // stopped: no more rounds
			return err
		}
		o.progressf("\r\033[K%s fan-out round %d/%d", sys.Name(), round+1, o.Rounds)
		n, err := fanRound(o, sys, ws, res, &cost)
		if err != nil {
			return err
		}
		o.progressf("\r\033[K%s fan-out round %d: %d of %d events\n", sys.Name(), round+1, n, o.Subs*o.Devices)
		res.FanoutExpected += o.Subs * o.Devices
	}
	o.progressf("\r\033[K")
	return nil
}

// fanRound opens the target's device, then closes it, and records each
// subscriber's latency and the round's CPU; it returns the events
// received.
func fanRound(o Options, sys system, ws []*workerProc, res *RunResult, cost *fanCost) (int, error) {
	t := ws[0]
	if _, err := t.ask("open "+target, "opened", time.Minute); err != nil {
		return 0, err
	}
	// The online is published at once; let it reach every subscriber,
	// then read the CPU the heartbeats alone take.
	time.Sleep(400 * time.Millisecond)
	q0 := readCPU(sys, ws)
	time.Sleep(600 * time.Millisecond)
	q1 := readCPU(sys, ws)
	if _, err := collectLatencies(ws, 0, time.Second, 0); err != nil {
		return 0, err
	}
	stop := make(chan struct{})
	series := sampleCPU(sys, ws, stop)
	f, err := t.ask("close", "closed", time.Minute)
	if err != nil {
		close(stop)
		return 0, err
	}
	closed, _ := strconv.ParseInt(f[0], 10, 64)
	recv, err := collectLatencies(ws, o.Subs*o.Devices, sys.Debounce()+30*time.Second, 100*time.Millisecond)
	close(stop)
	if err != nil {
		return 0, err
	}
	reads := <-series
	c0, c1 := burst(reads, recv)
	cost.add(q0, q1, c0, c1, len(recv))
	cost.addIdle(within(reads, recv))
	for _, at := range recv {
		res.Fanout = append(res.Fanout, time.Duration(at-closed)-sys.Debounce())
	}
	return len(recv), nil
}

// cpuRead is what the system's and the load processes' threads got from
// the scheduler at one moment (runTime), and the machine's idle time
// (idleTime); ok false when a process or /proc/stat could not be read.
type cpuRead struct {
	at        time.Time
	sys, load threadTime
	idle      time.Duration // all cores
	cpus      int
	ok        bool
}

func readCPU(sys system, ws []*workerProc) cpuRead {
	s, err1 := runTime(sys.Pids()...)
	l, err2 := runTime(workerPids(ws)...)
	idle, cpus, err3 := idleTime()
	return cpuRead{at: time.Now(), sys: s, load: l, idle: idle, cpus: cpus, ok: err1 == nil && err2 == nil && err3 == nil}
}

// cpuEvery is how often sampleCPU reads: the bracket of a burst of about
// 250 ms, with little of the bench's own CPU (a read is a file per thread).
const cpuEvery = 20 * time.Millisecond

// sampleCPU reads the CPU every cpuEvery until stop, then sends what it
// read.
func sampleCPU(sys system, ws []*workerProc, stop <-chan struct{}) <-chan []cpuRead {
	out := make(chan []cpuRead, 1)
	go func() {
		t := time.NewTicker(cpuEvery)
		defer t.Stop()
		reads := []cpuRead{readCPU(sys, ws)}
		for {
			select {
			case <-stop:
				out <- append(reads, readCPU(sys, ws))
				return
			case <-t.C:
				reads = append(reads, readCPU(sys, ws))
			}
		}
	}()
	return out
}

// burst is the reads that bracket the events received (Unix ns): the last
// at least cpuEvery before the first event (the writes start before it),
// the first after the last; the whole series when there is no event.
func burst(reads []cpuRead, recv []int64) (cpuRead, cpuRead) {
	if len(recv) == 0 {
		return reads[0], reads[len(reads)-1]
	}
	from := time.Unix(0, slices.Min(recv)).Add(-cpuEvery)
	to := time.Unix(0, slices.Max(recv))
	a, b := reads[0], reads[len(reads)-1]
	for _, r := range reads {
		if !r.at.After(from) {
			a = r
		}
	}
	for i := len(reads) - 1; i >= 0; i-- {
		if !reads[i].at.Before(to) {
			b = reads[i]
		}
	}
	return a, b
}

// within is the reads from the first at or after the first event
// received to the first at or after the last: the burst without its
// lead-in (burst's bracket starts before the first write, where the
// machine may idle for reasons of its own); ok false when the events
// came between two reads.
func within(reads []cpuRead, recv []int64) (a, b cpuRead, ok bool) {
	if len(recv) == 0 {
		return a, b, false
	}
	first, last := time.Unix(0, slices.Min(recv)), time.Unix(0, slices.Max(recv))
	ia := slices.IndexFunc(reads, func(r cpuRead) bool { return !r.at.Before(first) })
	ib := slices.IndexFunc(reads, func(r cpuRead) bool { return !r.at.Before(last) })
	if ia < 0 || ib <= ia {
		return a, b, false
	}
	return reads[ia], reads[ib], true
}

// fanCost sums the fan-out rounds' CPU and waits for a core beyond the
// heartbeats', their events, and the machine's idle time from each
// round's first event to its last (within).
type fanCost struct {
	sys, load threadTime
	idle      time.Duration // the cores' idle time from first to last event
	span      time.Duration // those windows' length times the cores
	events    int
	bad       bool
}

// add counts one round: c0 to c1 spans its burst of events (burst), q0 to
// q1 the quiet window before its close, whose rate is taken off.
func (c *fanCost) add(q0, q1, c0, c1 cpuRead, events int) {
	scale := c1.at.Sub(c0.at).Seconds() / q1.at.Sub(q0.at).Seconds()
	if !(q0.ok && q1.ok && c0.ok && c1.ok) || math.IsInf(scale, 0) || math.IsNaN(scale) {
		c.bad = true
		return
	}
	c.sys = c.sys.add(c1.sys.sub(c0.sys).sub(q1.sys.sub(q0.sys).scale(scale)))
	c.load = c.load.add(c1.load.sub(c0.load).sub(q1.load.sub(q0.load).scale(scale)))
	c.events += events
}

// addIdle counts the machine's idle cores from a to b (within), when ok.
func (c *fanCost) addIdle(a, b cpuRead, ok bool) {
	if !ok || !a.ok || !b.ok {
		return
	}
	c.idle += b.idle - a.idle
	c.span += b.at.Sub(a.at) * time.Duration(b.cpus)
}

// perEvent is the rounds' FanoutCost: per event, and the idle share.
func (c *fanCost) perEvent() FanoutCost {
	if c.bad || c.events == 0 {
		return unmeasuredFanout()
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(c.events) }
	idle := math.NaN()
	if c.span > 0 {
		idle = 100 * float64(c.idle) / float64(c.span)
	}
	return FanoutCost{per(c.sys.run), per(c.load.run), per(c.sys.wait), per(c.load.wait), idle}
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
