package cluster

import (
	"net"
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
// gate): no debounced offline, no lease expiry, no settled view. On the
// majority side the pings come back in a round trip, well within the
// debounce, so nothing waits; on the lone side they time out, the next
// verdict follows and the node fences (FenceWatch), having published
// nothing.
//
// Under the lease strategy a side holding the lease serves whatever it
// reaches (FenceWatch tells, LeaseServes). The doubt lasts at most
// FailureDetection: by then the others' verdicts are in and FenceWatch has
// decided; a member that answers memberlist's probes but never a ping
// (UDP cut, TCP not) must not hold every verdict for ever.

// doubtTick is the pause between two rounds of pings.
const doubtTick = 50 * time.Millisecond

// doubt is Gossip's quorum check after a death verdict.
type doubt struct {
	since atomic.Int64 // unix ns of the verdict that began it; 0: none
	loop  atomic.Bool  // a confirm loop runs
	lease atomic.Bool  // FenceWatch serves on the store's lease
	// ping, in tests, replaces memberlist's ping.
	ping func(id, addr string) bool
}

// InDoubt reports whether a death verdict has not yet been confirmed by
// enough members answering (see Doubt above): verdicts by time wait.
func (g *Gossip) InDoubt() bool { return g.doubt.since.Load() != 0 }

// LeaseServes tells the doubt that this side serves on the store's lease
// (FenceWatch, lease strategy): what it reaches is enough.
func (g *Gossip) LeaseServes(ok bool) {
	g.doubt.lease.Store(ok)
	if ok {
		g.doubt.since.Store(0)
	}
}

// doubtFrom puts the node in doubt after a death verdict at `at`, and
// starts the loop that clears it. It runs on the delivery goroutine,
// before subscribers hear of the verdict.
func (g *Gossip) doubtFrom(at time.Time) {
	if g.doubt.lease.Load() {
		return
	}
	g.doubt.since.Store(at.UnixNano())
	if g.doubt.loop.CompareAndSwap(false, true) {
		go g.confirmLoop()
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

// confirmRounds pings until a round confirms the quorum, the doubt times
// out, or the gossip stops.
func (g *Gossip) confirmRounds() {
	for {
		since := g.doubt.since.Load()
		if since == 0 {
			return
		}
		now := time.Now()
		start := time.Unix(0, since)
		v, base := g.confirm(now, start)
		switch {
		case v.Serve || g.doubt.lease.Load():
			g.doubt.since.CompareAndSwap(since, 0)
			g.log.Debug("cluster: death verdict confirmed: enough members answer", "verdict", v.String(), "doubt", time.Since(start).Round(time.Millisecond))
			continue
		case now.Sub(start) > FailureDetection(g.preset, len(base)):
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
// reached if memberlist acknowledged a probe of it after since or it
// answers a ping now, and the resolver's verdict on that.
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
	return Decide(base), base
}

// pingMember sends one memberlist ping (at most ProbeTimeout).
func (g *Gossip) pingMember(id, addr string) bool {
	if g.doubt.ping != nil {
		return g.doubt.ping(id, addr)
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil || g.ml == nil {
		return false
	}
	_, err = g.ml.Ping(id, ua)
	return err == nil
}
