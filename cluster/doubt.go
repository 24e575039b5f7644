package cluster

import (
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Doubt. A node cut off from the others learns it one death verdict at a
// time: in a 3-node cluster split 2+1, the lone node declares one of the
// others dead a probe round or so before the other, and in between it
// still counts two of three members, a majority. Acting on that first
// verdict, it reclaimed the dead member's devices and its views told its
// own subscribers they had gone offline, while they were connected to the
// majority all along: a false offline, fenced away a moment later but
// already seen.
//
// So a death verdict puts the node in doubt until it has heard, since
// that verdict, from enough members to serve (the resolver's rule over its
// quorum base: a majority, or half with the oldest member): a ping to each
// member the table holds alive, or memberlist's own acknowledged probe.
// While in doubt the node gives no verdict by time (actors: the verdict
// gate): no offline, debounced or not, no lease expiry, no settled view;
// and under the lease strategy it asks for the lease only as late as a
// side at or below half (Arbiter.Decide). On the
// majority side the pings come back in a round trip, well within the
// debounce, so nothing waits; on the lone side they time out (a round
// takes the probe timeout then), the next verdict follows and the node
// fences (FenceWatch), having published nothing (majority rule).
//
// Under the lease strategy a side serving on the lease serves whatever it
// reaches: the holder itself is not in doubt, and on its side a round in
// which the holder answers confirms (FenceWatch tells who holds it,
// LeaseServes). The doubt lasts at most FailureDetection from the latest
// verdict: by then the others' verdicts are in and FenceWatch has decided;
// a member that answers memberlist's probes but never a ping (UDP cut, TCP
// not) must not hold every verdict for ever.

// doubtTick is the pause between two rounds of pings.
const doubtTick = 50 * time.Millisecond

// doubt is Gossip's quorum check after a death verdict. Times are on the
// gossip's monotonic clock (since Gossip.start), so a step of the wall
// clock neither lengthens a doubt nor dates a probe wrongly.
type doubt struct {
	since atomic.Int64 // 1 + nanoseconds from Gossip.start to the verdict that began it; 0: none
	loop  atomic.Bool  // a confirm loop runs
	wg    sync.WaitGroup
	// holder is the lease's holder while FenceWatch serves on it (the lease
	// strategy), else "": a side whose holder answers needs no majority.
	holder atomic.Pointer[string]
	pinger pinger // memberlist's (NewGossip)
}

// pinger sends one ping to a member (at most ProbeTimeout) and reports
// whether it answered.
type pinger interface {
	ping(id, addr string) bool
}

// memberlistPinger pings through the gossip's memberlist (none yet: no
// answer).
type memberlistPinger struct{ g *Gossip }

func (p memberlistPinger) ping(id, addr string) bool {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil || p.g.ml == nil {
		return false
	}
	_, err = p.g.ml.Ping(id, ua)
	return err == nil
}

// Doubt is how long this node has been in doubt of a death verdict not
// yet confirmed by enough members answering (see Doubt above; 0: not in
// doubt): verdicts by time wait.
func (g *Gossip) Doubt() time.Duration {
	s := g.doubt.since.Load()
	if s == 0 {
		return 0
	}
	return max(time.Since(g.start)-time.Duration(s-1), time.Nanosecond)
}

// LeaseServes tells the doubt who holds the lease this side serves on
// (FenceWatch, lease strategy; "" when it serves on no lease): the holder
// itself leaves its doubt at once and enters none; on its side a round in
// which the holder answers confirms the verdict.
func (g *Gossip) LeaseServes(holder string) {
	if holder == "" {
		g.doubt.holder.Store(nil)
		return
	}
	g.doubt.holder.Store(&holder)
	if holder == g.conf.Name {
		g.doubt.since.Store(0) // this node holds it: confirmed now, not a round later
	}
}

// holdsLease reports whether this node holds the lease its side serves on.
func (g *Gossip) holdsLease() bool {
	h := g.doubt.holder.Load()
	return h != nil && *h == g.conf.Name
}

// markDoubt puts the node in doubt. apply calls it, g.mu held, in the same
// step as the member table takes a death verdict: whoever reads the table
// (FenceWatch: Base, then Doubt) sees the verdict with its doubt, never
// the verdict alone.
func (g *Gossip) markDoubt() {
	if g.holdsLease() {
		return // the lease says this side serves, whoever answers
	}
	g.doubt.since.Store(int64(time.Since(g.start)) + 1)
}

// confirmDoubt starts the loop that clears a doubt, unless one runs. It
// runs on the delivery goroutine, before subscribers hear of the verdict.
func (g *Gossip) confirmDoubt() {
	if g.doubt.since.Load() != 0 && g.doubt.loop.CompareAndSwap(false, true) {
		g.doubt.wg.Go(g.confirmLoop)
	}
}

// confirmLoop runs rounds until the doubt is cleared, then ends; a verdict
// that came as it ended starts it again.
func (g *Gossip) confirmLoop() {
	for {
		g.confirmRounds()
		g.doubt.loop.Store(false)
		if g.doubt.since.Load() == 0 || !g.doubt.loop.CompareAndSwap(false, true) {
			return
		}
	}
}

// confirmRounds pings until a round confirms the verdict, the doubt times
// out, or the gossip stops.
func (g *Gossip) confirmRounds() {
	for {
		since := g.doubt.since.Load()
		if since == 0 {
			return
		}
		start := g.start.Add(time.Duration(since - 1))
		if g.holdsLease() {
			g.doubt.since.CompareAndSwap(since, 0)
			continue
		}
		v, base := g.confirm(time.Now(), start)
		switch {
		case v.Serve:
			g.doubt.since.CompareAndSwap(since, 0)
			g.log.Debug("cluster: death verdict confirmed: enough members answer", "verdict", v.String(), "doubt", time.Since(start).Round(time.Millisecond))
			continue
		case time.Since(start) > FailureDetection(g.preset, len(base)):
			g.doubt.since.CompareAndSwap(since, 0)
			g.log.Warn("cluster: death verdict not confirmed within the failure detection: verdicts go on", "verdict", v.String())
			continue
		}
		select {
		case <-g.done:
			g.doubt.since.Store(0)
			return
		case <-time.After(doubtTick):
		}
	}
}

// confirm is one round: the quorum base, each member the table holds alive
// reached if memberlist acknowledged a probe of it, or it answered a ping,
// after since (it answers one now otherwise), and the resolver's verdict
// on that; serving if the lease's holder (LeaseServes) is reached.
func (g *Gossip) confirm(now, since time.Time) (Verdict, []Voter) {
	base := g.Base(now, StableAfter(g.preset, len(g.Base(now, time.Hour))))
	var wg sync.WaitGroup
	for i := range base {
		m := &base[i]
		if !m.Reached || m.ID == g.conf.Name {
			continue
		}
		g.mu.Lock()
		heard := g.heard[m.ID].After(since)
		addr := ""
		if a := g.members[m.ID].Addresses; len(a) > 0 {
			addr = a[0]
		}
		g.mu.Unlock()
		if heard {
			continue
		}
		wg.Go(func() { m.Reached = g.pingMember(m.ID, addr) })
	}
	wg.Wait()
	v := Decide(base)
	if h := g.doubt.holder.Load(); h != nil && !v.Serve {
		v.Serve = slices.ContainsFunc(base, func(m Voter) bool { return m.ID == *h && m.Reached })
	}
	return v, base
}

// pingMember sends one ping (the doubt's pinger); an answer is the
// member's latest sign of life here, as an acknowledged probe.
func (g *Gossip) pingMember(id, addr string) bool {
	ok := g.doubt.pinger.ping(id, addr)
	if ok {
		g.mu.Lock()
		if _, alive := g.heard[id]; alive { // deleted when the member fails
			g.heard[id] = time.Now()
		}
		g.mu.Unlock()
	}
	return ok
}
