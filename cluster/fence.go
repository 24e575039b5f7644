package cluster

import (
	"context"
	"fmt"
	"log/slog"
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
//   - minority: the split-brain resolver (resolver.go) says its side does
//     not serve: it reaches less than half of its quorum base, or exactly
//     half without the oldest member (a network partition, or the others'
//     crash; the deciding side goes on and reclaims);
//   - lease: with the lease strategy (arbiter.go), the arbiter in the store is
//     held and renewed by a member this side does not reach;
//   - declared dead: memberlist refuted a death verdict on it after it
//     joined (a stall shorter than the pause threshold, probes lost under
//     load): the others reclaimed and blocked it all the same, and it is
//     alive again in their tables, left out of their placement while its
//     own still names itself.
//
// A fenced node stops taking devices, closes them with 1001 so they
// reconnect to a healthy node, and restarts as a new member (presenced
// re-executes itself), which rejoins (rejoin.go). A majority rule cannot
// tell a partition from the others' crash: the last survivor of two
// simultaneous crashes in a cluster of three fences too, and a cluster of
// two survives only the death of its younger member; the lease strategy
// lets either survive, as long as the survivor reaches the store.

// FenceReason says why a node fenced itself.
type FenceReason string

const (
	FencePaused   FenceReason = "paused"
	FenceMinority FenceReason = "minority"
	FenceLease    FenceReason = "lease" // the lease strategy (arbiter.go): the other side holds it
	// FenceDeclaredDead: the others declared it dead and it refuted the
	// verdict (Gossip.DeclaredDead): a stall too short to count as a
	// pause, a probe lost under load.
	FenceDeclaredDead FenceReason = "declared_dead"
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

// Base is the quorum base at now (see the resolver): itself and the
// members it sees alive (reached) and those dead for less than stable. Members that left do not count, nor a dead one whose gossip
// address an alive member now holds (restarted under another name).
func (g *Gossip) Base(now time.Time, stable time.Duration) []Voter {
	g.mu.Lock()
	defer g.mu.Unlock()
	base := []Voter{{ID: g.conf.Name, Up: g.self.Up, Reached: true}}
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
		v := Voter{ID: id, Up: g.metas[id].Up, Reached: m.State == Alive}
		switch {
		case m.State == Alive:
		case len(m.Addresses) > 0 && alive[m.Addresses[0]]:
			continue // restarted under another name: the alive one stands for it
		case m.State == Dead && now.Sub(m.Since) < stable:
		default:
			continue
		}
		base = append(base, v)
	}
	return base
}

// FenceTick is how often FenceWatch looks, unless its Tick says otherwise.
const FenceTick = 100 * time.Millisecond

// FenceWatch checks for the signs every Tick.
type FenceWatch struct {
	Gossip *Gossip
	Preset string
	Tick   time.Duration // default FenceTick
	// Stable: a member dead for this long leaves the quorum base (it
	// crashed for good and this side carried on). Default StableAfter for
	// the members in the base.
	Stable time.Duration
	// Log, when set, gets one line each time the quorum base changes size.
	Log *slog.Logger
	// Arbiter, when set, is the lease strategy (arbiter.go): the store's arbiter
	// decides once members are unreachable, the majority rule otherwise.
	Arbiter *Arbiter
}

// Run calls fence once, at the first sign, with the quorum base it decided
// on, then returns; or returns when ctx ends.
func (w FenceWatch) Run(ctx context.Context, fence func(reason FenceReason, detail string, base []Voter)) {
	tick := w.Tick
	if tick <= 0 {
		tick = FenceTick
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	last, size := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		reason, detail, base := w.check(now, last)
		if reason != "" {
			fence(reason, detail, base)
			return
		}
		if len(base) != size && w.Log != nil {
			w.Log.Info("cluster: quorum base", "members", len(base), "was", size, "oldest", Oldest(base).ID)
		}
		last, size = now, len(base)
	}
}

// check is one look (gap is since the previous one): a reason to fence, or
// "", and the quorum base.
func (w FenceWatch) check(now, last time.Time) (FenceReason, string, []Voter) {
	stable := w.Stable
	if stable <= 0 {
		stable = StableAfter(w.Preset, len(w.Gossip.Base(now, time.Hour)))
	}
	base := w.Gossip.Base(now, stable)
	// A stall under a second is the scheduler or the collector, not a
	// pause anyone could have declared us dead in.
	pause := max(MinDetection(w.Preset, len(base)), time.Second)
	if gap := now.Sub(last); len(base) > 1 && gap > pause {
		return FencePaused, fmt.Sprintf("did not run for %v (the others may declare a member dead after %v)", gap.Round(time.Millisecond), pause), base
	}
	if who := w.Gossip.DeclaredDead(); who != "" && len(base) > 1 {
		return FenceDeclaredDead, "declared dead and alive again under the same id (" + who + "): the others reclaimed its leases and blocked it", base
	}
	v := Decide(base)
	if w.Arbiter != nil {
		call, why := w.Arbiter.Decide(now, v, base, w.Gossip.Doubt() > 0)
		holder := ""
		if call == ArbiterServe && w.Arbiter.state == ArbiterOurs {
			holder = w.Arbiter.row.Holder
		}
		w.Gossip.LeaseServes(holder)
		if call == ArbiterFence {
			return FenceLease, why, base
		}
		return "", "", base
	}
	if !v.Serve {
		return FenceMinority, v.String(), base
	}
	return "", "", base
}
