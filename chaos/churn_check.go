package chaos

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// liveBound is, at one sample, what the harness's schedule explains: the
// leases of devices seen in the idle window before it (dialling, connected
// or gone for less than the window) and the views of those devices' users
// and contacts (upper bounds, over the baseline), and the leases that must
// exist: devices connected from half a second before the sample until half
// a second after it (lower bound).
type liveBound struct {
	leases, views, held int
}

// boundAt computes the bounds at a sample read over [from, to]: the upper
// ones from the churning sessions ss, the lower one from them and the
// residents.
func boundAt(ss, residents []*churnSession, window time.Duration, from, to time.Time) liveBound {
	leases := 0
	views := map[string]bool{}
	b := liveBound{held: held(residents, from, to)}
	for _, s := range ss {
		b.held += held([]*churnSession{s}, from, to)
		start, _, down := s.times()
		if start.IsZero() || start.After(to) || !down.IsZero() && down.Before(from.Add(-window)) {
			continue
		}
		leases++
		views[s.User] = true
		for _, c := range s.Contacts {
			views[c] = true
		}
	}
	b.leases, b.views = leases, len(views)
	return b
}

// held counts the sessions of ss connected from half a second before from
// until half a second after to.
func held(ss []*churnSession, from, to time.Time) int {
	n := 0
	for _, s := range ss {
		if _, up, down := s.times(); !up.IsZero() && up.Before(from.Add(-time.Second/2)) && (down.IsZero() || down.After(to.Add(time.Second/2))) {
			n++
		}
	}
	return n
}

// allowed is the most actors of a kind the checks accept: the baseline and
// what the schedule explains, with ChurnTolerance over it.
func allowed(baseline float64, explained int) float64 {
	return baseline + float64(explained)*(1+ChurnTolerance)
}

// checkTracking: at every sample of the waves, lease and view actors over
// the cluster stay within what the devices of the idle window explain,
// and every device connected has its lease.
func (ch *Churn) checkTracking(p *churnPlan, t0, end time.Time) {
	base := ChurnSample{Nodes: ch.Baseline}
	bl, bv := base.total(leaseOf), base.total(viewOf)
	var worstL, worstV, missing struct {
		n      int
		detail string
	}
	for i, s := range ch.Samples {
		if s.At.Before(t0) || s.At.After(end) {
			continue
		}
		to := s.At.Add(time.Second) // the nodes are read one after another
		b := boundAt(p.sessions, p.residents, p.window(), s.At, to)
		t := s.At.Sub(t0).Seconds()
		ch.Samples[i].LeaseLimit, ch.Samples[i].ViewLimit = allowed(bl, b.leases), allowed(bv, b.views)
		if l := s.total(leaseOf); l > allowed(bl, b.leases) {
			worstL.n++
			worstL.detail = fmt.Sprintf("at %.0f s: %.0f lease actors, allowed %.0f (baseline %.0f + %d devices of the window + 10%%)", t, l, allowed(bl, b.leases), bl, b.leases)
		}
		if v := s.total(viewOf); v > allowed(bv, b.views) {
			worstV.n++
			worstV.detail = fmt.Sprintf("at %.0f s: %.0f view actors, allowed %.0f (baseline %.0f + %d users and contacts of the window + 10%%)", t, v, allowed(bv, b.views), bv, b.views)
		}
		if l := s.total(leaseOf); l < float64(b.held) {
			missing.n++
			missing.detail = fmt.Sprintf("at %.0f s: %.0f lease actors for %d devices connected", t, l, b.held)
		}
	}
	add := func(name string, w struct {
		n      int
		detail string
	}, ok string) {
		if w.n == 0 {
			ch.Checks = append(ch.Checks, Check{name, true, ok})
			return
		}
		ch.Checks = append(ch.Checks, Check{name, false, fmt.Sprintf("%d samples over; the last %s", w.n, w.detail)})
	}
	add("leases track devices", worstL, "lease actors within the devices of the idle window at every sample")
	add("views track devices", worstV, "view actors within the users and contacts of the idle window at every sample")
	add("connected devices hold leases", missing, "at least one lease actor per connected device at every sample")
}

// checkFlat: what the nodes hold once a wave has left does not grow with
// the waves, each of new users: the view and lease actors over the cluster
// and each node's live heap and RSS late in the run are within 10% of
// early in it: memory does not follow the users ever seen. Early and late
// are the median of the first and of the last flatSpan readings after a
// wave (one each with fewer than nine waves): one RSS reading can sit a few
// MB off its neighbours (free heap pages the node has not yet given back,
// under memreturn.MinExcess; a 12-wave run read n1 at 55.1, 60.0 and 58.8
// MB after waves 1 to 3).
func (ch *Churn) checkFlat() {
	if len(ch.AfterWave) < 2 {
		return
	}
	k := flatSpan(len(ch.AfterWave))
	early, late := ch.AfterWave[:k], ch.AfterWave[len(ch.AfterWave)-k:]
	total := func(f func(NodeSample) float64) func([]NodeSample) float64 {
		return func(ns []NodeSample) float64 { return ChurnSample{Nodes: ns}.total(f) }
	}
	el, ll := medianOf(early, total(leaseOf)), medianOf(late, total(leaseOf))
	ev, lv := medianOf(early, total(viewOf)), medianOf(late, total(viewOf))
	ok := within(ll, el) && within(lv, ev)
	detail := fmt.Sprintf("leases %.0f then %.0f, views %.0f then %.0f; live heap MB", el, ll, ev, lv)
	for i, n := range ch.AfterWave[0] {
		live := func(ns []NodeSample) float64 { return ns[i].Live }
		rss := func(ns []NodeSample) float64 { return ns[i].RSS }
		eLive, lLive, eRSS, lRSS := medianOf(early, live), medianOf(late, live), medianOf(early, rss), medianOf(late, rss)
		ok = ok && within(lLive, eLive) && within(lRSS, eRSS)
		detail += fmt.Sprintf(" %s %.1f then %.1f (RSS %.1f then %.1f)", n.Node, eLive/1e6, lLive/1e6, eRSS/1e6, lRSS/1e6)
	}
	span := fmt.Sprintf("after wave 1 then after wave %d", len(ch.AfterWave))
	if k > 1 {
		span = fmt.Sprintf("median after waves 1 to %d then after waves %d to %d", k, len(ch.AfterWave)-k+1, len(ch.AfterWave))
	}
	ch.Checks = append(ch.Checks, Check{"flat across waves", ok, span + ": " + detail})
}

// medianOf is the median of f over the readings after some waves.
func medianOf(waves [][]NodeSample, f func([]NodeSample) float64) float64 {
	vs := make([]float64, len(waves))
	for j, w := range waves {
		vs[j] = f(w)
	}
	return median(vs)
}

// flatSpan is how many readings after a wave checkFlat takes at each end
// of a run of waves: three from nine waves on (a third of them at most,
// so that the two ends stay apart), else one (of two, a median would be
// their mean: not one reading's).
func flatSpan(waves int) int {
	if waves >= 9 {
		return 3
	}
	return 1
}

// checkUp: no node fenced itself (and restarted, losing what it held)
// after the baseline, and each answered every sample; otherwise the
// figures after are not the same process's.
func (ch *Churn) checkUp(since time.Time) {
	fenced, missed := map[string]bool{}, 0
	for _, s := range ch.Samples {
		for _, n := range s.Nodes {
			if n.Err != "" && s.At.After(since) {
				missed++
			}
			if n.Fenced >= float64(since.Unix()) {
				fenced[n.Node] = true
			}
		}
	}
	c := Check{Name: "nodes stayed up", OK: len(fenced) == 0 && missed == 0, Detail: "no node fenced itself; each answered every sample"}
	if !c.OK {
		c.Detail = fmt.Sprintf("fenced and restarted: %v; %d readings failed (/metrics or the heap profile; a fenced node restarts with nothing: its memory after is not comparable)", slices.Sorted(maps.Keys(fenced)), missed)
	}
	ch.Checks = append(ch.Checks, c)
}

// unchecked says which of a check's settled readings may hold another
// collection's live heap than their own (NodeSample.Unchecked).
func unchecked(ns ...NodeSample) string {
	if slices.ContainsFunc(ns, func(n NodeSample) bool { return n.Unchecked }) {
		return "; a reading's live heap perhaps another collection's than its own"
	}
	return ""
}

// within reports whether got is at most ChurnTolerance over base.
func within(got, base float64) bool { return got <= base*(1+ChurnTolerance)+0.5 }

// backToBaseline reports whether final is back to base: views and leases
// over the cluster, and each node's heap and RSS.
func backToBaseline(base, final []NodeSample) bool {
	b, f := ChurnSample{Nodes: base}, ChurnSample{Nodes: final}
	if !within(f.total(leaseOf), b.total(leaseOf)) || !within(f.total(viewOf), b.total(viewOf)) {
		return false
	}
	for i := range base {
		if !within(final[i].RSS, base[i].RSS) || !within(final[i].Live, base[i].Live) {
			return false
		}
	}
	return true
}

// checkBaseline compares the final state with the baseline: the actors of
// each kind over the cluster, then each node's live heap (the objects left
// right after a GC: what the node holds) and RSS (what the system sees,
// with what the runtime keeps: spans pinned by a few objects, pages not
// yet returned).
func (ch *Churn) checkBaseline() {
	b, f := ChurnSample{Nodes: ch.Baseline}, ChurnSample{Nodes: ch.Final}
	for _, k := range []struct {
		name string
		of   func(NodeSample) float64
	}{{"leases back to baseline", leaseOf}, {"views back to baseline", viewOf}} {
		bv, fv := b.total(k.of), f.total(k.of)
		ch.Checks = append(ch.Checks, Check{k.name, within(fv, bv), fmt.Sprintf("%.0f after, %.0f at the baseline (at most +10%%: %.0f)", fv, bv, bv*(1+ChurnTolerance))})
	}
	for i := range ch.Baseline {
		bn, fn := ch.Baseline[i], ch.Final[i]
		ch.Checks = append(ch.Checks,
			Check{bn.Node + " live heap back to baseline", within(fn.Live, bn.Live), fmt.Sprintf("%.1f MB after, %.1f MB at the baseline (heap in use %.1f MB, %.1f MB)%s", fn.Live/1e6, bn.Live/1e6, fn.Heap/1e6, bn.Heap/1e6, unchecked(bn, fn))},
			Check{bn.Node + " RSS back to baseline", within(fn.RSS, bn.RSS), fmt.Sprintf("%.1f MB after, %.1f MB at the baseline (including heap in use %.1f, %.1f; free heap pages not yet returned %.1f, %.1f; stacks %.1f, %.1f)",
				fn.RSS/1e6, bn.RSS/1e6, fn.Heap/1e6, bn.Heap/1e6, fn.Free/1e6, bn.Free/1e6, fn.Stacks/1e6, bn.Stacks/1e6)})
	}
}
