package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ChurnSettle is how long, past the idle window after the last departure,
// the nodes have to come back to the baseline (the Go runtime returns freed
// heap to the system in the background).
const ChurnSettle = 30 * time.Second

func runChurn(ctx context.Context, e *Env, r *Round) error {
	p := e.churn
	ch := p.report()
	r.Churn = ch
	r.Fault = fmt.Sprintf("%d users in %d waves, about %d online at once, %d residents; stay %v, idle %v (seed %d)",
		p.Users, p.Waves, p.Online, len(p.residents), p.Stay, p.Idle, p.Seed)
	f := &churnFleet{secret: e.Cluster.Secret, nodes: e.Cluster.Nodes}
	sp := &sampler{nodes: e.Cluster.Nodes, online: func() int { return int(f.online.Load()) }}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go sp.run(sctx)
	go e.churnProgress(sctx, p, f, sp)
	ch.phase("residents")
	rctx, leave := context.WithCancel(ctx)
	residents := f.launch(rctx, p.residents, time.Now())
	defer residents.Wait()
	defer leave()
	if err := awaitUp(ctx, p.residents, 30*time.Second); err != nil {
		return err
	}
	ch.Cold = sp.settled(ctx, e.Cluster.Dir, "cold")
	e.say("churn: cold, before the warm-up: %s", brief(ch.Cold))
	ch.phase("warm-up")
	f.launch(ctx, p.warm, time.Now()).Wait()
	time.Sleep(time.Until(lastDeparture(p.warm).Add(p.window())))
	ch.phase("baseline")
	ch.Baseline = sp.settled(ctx, e.Cluster.Dir, "baseline")
	e.say("churn: baseline %s", brief(ch.Baseline))
	t0, harness := time.Now(), cpuSelf()
	e.runWaves(ctx, ch, f, sp)
	harness = cpuSelf() - harness
	last := lastDeparture(p.sessions)
	e.churnBack(ctx, ch, sp, p, last)
	stop()
	if ctx.Err() != nil || len(ch.Final) != len(ch.Baseline) {
		return fmt.Errorf("chaos: churn interrupted: %v", ctx.Err())
	}
	ch.Samples = sp.Samples()
	ch.PeakOnline, ch.Retries = int(f.peak.Load()), f.retry.Load()
	ch.count(slices.Concat(p.residents, p.sessions))
	ch.checkTracking(p, t0, last.Add(p.window()))
	ch.AfterWave = append(ch.AfterWave, ch.Final) // the last wave's
	ch.checkBaseline()
	ch.checkFlat()
	ch.checkUp(t0)
	for _, c := range ch.Checks {
		if !c.OK {
			r.find("churn", "", "", c.Name+": "+c.Detail)
		}
	}
	if ch.Failed > 0 {
		r.find("churn", "", "", fmt.Sprintf("%d devices never connected, such as: %s", ch.Failed, strings.Join(ch.Errors, "; ")))
	}
	r.Notes = append(r.Notes, ch.cpu(t0, last, harness))
	r.Notes = append(r.Notes, fmt.Sprintf("peak %d devices online; %d presence events to subscribers; %d handshakes tried again (429, 503, dropped); %d devices cut by the server before they left (heartbeats late under load)", ch.PeakOnline, ch.Events, ch.Retries, ch.Cut))
	return ctx.Err()
}

// runWaves runs the waves one after another: each arrives over Arrive;
// once its devices have left and the idle window has passed, the nodes'
// settled state is read (AfterWave) and the next wave starts.
func (e *Env) runWaves(ctx context.Context, ch *Churn, f *churnFleet, sp *sampler) {
	p := e.churn
	for k, ws := range p.waves() {
		ch.phase(fmt.Sprintf("wave %d", k+1))
		f.launch(ctx, ws, time.Now()).Wait()
		last := lastDeparture(ws)
		ch.Phases = append(ch.Phases, Phase{fmt.Sprintf("wave %d left", k+1), last})
		if k == len(p.waves())-1 || ctx.Err() != nil {
			return
		}
		time.Sleep(time.Until(last.Add(p.window())))
		ch.AfterWave = append(ch.AfterWave, sp.settled(ctx, e.Cluster.Dir, fmt.Sprintf("wave%d", k+1)))
		e.say("churn: after wave %d: %s", k+1, brief(ch.AfterWave[k]))
	}
}

// report is the run's Churn with the plan's figures.
func (p *churnPlan) report() *Churn {
	return &Churn{Seed: p.Seed, Users: p.Users, Online: p.Online, Residents: len(p.residents), Warm: len(p.warm),
		Contacts: ChurnContacts, Waves: p.Waves, StaySec: p.Stay.Seconds(), IdleSec: p.Idle.Seconds(),
		WindowSec: p.window().Seconds(), ArriveSec: p.Arrive.Seconds(), BackSec: -1}
}

// count adds up the devices that never connected and the events received.
func (ch *Churn) count(ss []*churnSession) {
	for _, s := range ss {
		s.mu.Lock()
		if s.err != nil {
			ch.Failed++
			if len(ch.Errors) < 5 {
				ch.Errors = append(ch.Errors, s.err.Error())
			}
		}
		ch.Cut += s.cut
		ch.Events += s.events
		s.mu.Unlock()
	}
}

func lastDeparture(ss []*churnSession) time.Time {
	var last time.Time
	for _, s := range ss {
		if _, _, down := s.times(); down.After(last) {
			last = down
		}
	}
	return last
}

// churnBack waits for the idle window after the last departure, then
// reads the settled state until it is back to the baseline or ChurnSettle
// has passed; the last reading is the final state.
func (e *Env) churnBack(ctx context.Context, ch *Churn, sp *sampler, p *churnPlan, last time.Time) {
	time.Sleep(time.Until(last.Add(p.window())))
	deadline := last.Add(p.window() + ChurnSettle)
	for ctx.Err() == nil {
		ch.Final = sp.settled(ctx, e.Cluster.Dir, "final")
		if backToBaseline(ch.Baseline, ch.Final) {
			ch.BackSec = time.Since(last).Seconds()
			break
		}
		if time.Now().After(deadline) {
			break
		}
		e.say("churn: not back yet: %s", brief(ch.Final))
	}
	ch.phase("final")
	e.say("churn: final %s", brief(ch.Final))
}

// churnProgress prints, every 5 s, the devices online and the cluster's
// actors and memory.
func (e *Env) churnProgress(ctx context.Context, p *churnPlan, f *churnFleet, sp *sampler) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		started := 0
		for _, s := range p.sessions {
			if start, _, _ := s.times(); !start.IsZero() {
				started++
			}
		}
		var last []NodeSample
		if ss := sp.Samples(); len(ss) > 0 {
			last = ss[len(ss)-1].Nodes
		}
		e.say("churn: %d/%d users started, %d online (peak %d); %s", started, p.Users, f.online.Load(), f.peak.Load(), brief(last))
	}
}

// brief is the cluster's actors and each node's RSS and heap, for a
// progress line.
func brief(ns []NodeSample) string {
	s := ChurnSample{Nodes: ns}
	out := fmt.Sprintf("leases %.0f, views %.0f, connections %.0f; MB RSS/heap in use/live heap", s.total(leaseOf), s.total(viewOf), s.total(func(n NodeSample) float64 { return n.Connections }))
	for _, n := range ns {
		out += fmt.Sprintf(" %s %.0f/%.0f/%.0f", n.Node, n.RSS/1e6, n.Heap/1e6, n.Live/1e6)
	}
	return out
}

// cpuSelf is the CPU time this process used so far.
func cpuSelf() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpu says how many cores each node and the harness used on average from
// t0 to last (the waves): the load the figures were taken under.
func (ch *Churn) cpu(t0, last time.Time, harness time.Duration) string {
	secs := last.Sub(t0).Seconds()
	var first, end *ChurnSample
	for i := range ch.Samples {
		s := &ch.Samples[i]
		if first == nil && !s.At.Before(t0) {
			first = s
		}
		if !s.At.After(last) {
			end = s
		}
	}
	out := fmt.Sprintf("cores used during the waves (%.0f s): harness %.2f", secs, harness.Seconds()/secs)
	if first != nil && end != nil && len(first.Nodes) == len(end.Nodes) {
		for i, n := range end.Nodes {
			out += fmt.Sprintf(", %s %.2f", n.Node, (n.CPU-first.Nodes[i].CPU)/end.At.Sub(first.At).Seconds())
		}
	}
	return out
}
