package cluster

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Fencing. A member the others may have declared dead must stop serving
// devices at once: they reclaimed its leases (gateway_down), re-created its
// lease and view actors elsewhere, and proto.actor blocked its actor system
// id for good, so whatever it still holds is stale. It cannot learn its
// verdict for sure, so it fences on either sign:
//
//   - paused: the process did not run for longer than the others need, at
//     the least, to declare a silent member dead (SIGSTOP, a VM pause);
//   - minority: it reaches at most half of the members it knew (a network
//     partition; the majority side goes on and reclaims). Members that
//     left do not count, nor one dead for 2 x failure detection, nor a dead
//     one whose gossip address an alive member now holds (restarted under
//     another name).
//
// A fenced node stops taking devices, closes them with 1001 so they
// reconnect to a healthy node, and restarts as a new member (presenced
// re-executes itself). A majority rule cannot tell a partition from the
// others' crash: the last survivor of a cluster of three fences too, and a
// cluster of two does not survive the death of either node.

// FenceReason says why a node fenced itself.
type FenceReason string

const (
	FencePaused   FenceReason = "paused"
	FenceMinority FenceReason = "minority"
)

// MinDetection is the earliest the others can declare a silent member dead,
// for n members: a probe timeout plus memberlist's shortest suspicion
// timeout (SuspicionMult x max(1, log10 n) x ProbeInterval), when every
// other member confirms the suspicion at once.
func MinDetection(preset string, n int) time.Duration {
	c := profile(preset)
	scale := math.Max(1, math.Log10(float64(max(n, 1))))
	return c.ProbeTimeout + time.Duration(float64(c.SuspicionMult)*scale*float64(c.ProbeInterval))
}

// Quorum counts, at now, the members this one reaches (itself and those it
// sees alive) and the members it knows: also the suspect ones and those
// dead for less than forget. Members that left are not counted.
func (g *Gossip) Quorum(now time.Time, forget time.Duration) (reach, known int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	reach, known = 1, 1        // itself
	alive := map[string]bool{} // gossip addresses of alive members
	for id, m := range g.members {
		if m.State == Alive && len(m.Addresses) > 0 && id != g.conf.Name {
			alive[m.Addresses[0]] = true
		}
	}
	for id, m := range g.members {
		if id == g.conf.Name {
			continue
		}
		switch {
		case m.State == Alive:
			reach++
			known++
		case len(m.Addresses) > 0 && alive[m.Addresses[0]]:
			// Restarted under another name (the default node id has a
			// random suffix): the alive one stands for it.
		case m.State == Dead && now.Sub(m.Since) < forget:
			known++
		}
	}
	return reach, known
}

// FenceWatch checks for the signs every Tick.
type FenceWatch struct {
	Gossip *Gossip
	Preset string
	Tick   time.Duration // default 100 ms
	// Forget: a member dead for this long no longer counts as known (it
	// crashed for good and the others carried on). Default 2 x the
	// failure detection for the known members.
	Forget time.Duration
}

// Run calls fence once, at the first sign, then returns; or returns when
// ctx ends.
func (w FenceWatch) Run(ctx context.Context, fence func(FenceReason, string)) {
	tick := w.Tick
	if tick <= 0 {
		tick = 100 * time.Millisecond
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if reason, detail, ok := w.check(now, last); ok {
			fence(reason, detail)
			return
		}
		last = now
	}
}

// check is one look: gap is since the previous one.
func (w FenceWatch) check(now, last time.Time) (FenceReason, string, bool) {
	forget := w.Forget
	_, known := w.Gossip.Quorum(now, time.Hour)
	if forget <= 0 {
		forget = 2 * FailureDetection(w.Preset, known)
	}
	reach, known := w.Gossip.Quorum(now, forget)
	// A stall under a second is the scheduler or the collector, not a
	// pause anyone could have declared us dead in.
	pause := max(MinDetection(w.Preset, known), time.Second)
	if gap := now.Sub(last); known > 1 && gap > pause {
		return FencePaused, fmt.Sprintf("did not run for %v (the others may declare a member dead after %v)", gap.Round(time.Millisecond), pause), true
	}
	if 2*reach <= known && known > 1 {
		return FenceMinority, fmt.Sprintf("reaches %d of the %d members it knows", reach, known), true
	}
	return "", "", false
}
