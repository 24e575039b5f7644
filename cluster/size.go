package cluster

import (
	"math"
	"time"
)

// What grows with the cluster. FailureDetection is one member's death as
// the others, healthy, see it; a side cut off from the others learns of
// theirs one probe at a time, and its own probes slow down as they fail.
// These derive, from memberlist's configuration of a preset
// (hashicorp/memberlist v0.7.0, state.go and util.go), what a cluster of n
// members takes; docs/bounds.md "The cluster's size" says how each grows.

// LeaveTimeout is how long a fencing node waits for each of its two
// goodbyes (its metadata marked leaving, then memberlist's leave) to be
// sent before it drains its devices (cmd/presenced fence).
const LeaveTimeout = time.Second

// FenceLeave is the longest a fencing node takes between its decision and
// its first device closed: both goodbyes timing out, on a side whose
// gossip reaches nobody.
const FenceLeave = 2 * LeaveTimeout

// ArbiterMembers is the size the lease strategy's TTL is derived for
// (NewArbiter): the failure detection is the same for up to ten members.
const ArbiterMembers = 3

// needDead is how many of the members outside a side of side members, in
// a cluster of n, it must declare dead before the resolver (Decide) fences
// it: until it reaches at most half of n. A tie goes to the side with the
// oldest member, which serves: a side without it fences at exactly half.
func needDead(n, side int) int {
	if 2*side > n {
		return 0 // a majority: it serves
	}
	return (n + 1) / 2
}

// MinorityDetection is the worst case from a cut to FenceWatch deciding
// that a side of side members in a cluster of n (majority rule) must
// fence: its members see the others only through their own probes, one
// member per probe round. The probe under way at the cut runs out (a probe
// interval); each member of its own side may come first in the rest of
// that round and in the next (a probe interval each); then one failed
// probe per member it must declare dead (needDead), each lasting the probe
// interval scaled by memberlist's awareness, which every failed probe
// raises by the nacks it did not get (IndirectChecks, at least 1) up to
// AwarenessMaxMultiplier; the last verdict after the suspicion timeout
// (no confirmations reach a side cut off: the longest one when memberlist
// expects any); FenceWatch reads it at its next tick. A side's members share
// their verdicts by gossip, so a larger side is faster: this is the bound
// for each of them alone.
func MinorityDetection(preset string, n, side int) time.Duration {
	c := profile(preset)
	need := needDead(n, side)
	if need <= 0 {
		return FenceTick
	}
	d := c.ProbeInterval * time.Duration(1+2*(side-1))
	score, delta := 0, max(1, min(c.IndirectChecks, n-2))
	for range need {
		d += c.ProbeInterval * time.Duration(score+1)
		score = min(score+delta, c.AwarenessMaxMultiplier-1)
	}
	return d + suspicionAlone(preset, n) + FenceTick
}

// suspicionAlone is memberlist's suspicion timeout for n members when no
// confirmation comes: its minimum when it expects none (SuspicionMult - 2
// < 1, or too few members to give them), else SuspicionMaxTimeoutMult
// times that.
func suspicionAlone(preset string, n int) time.Duration {
	c := profile(preset)
	scale := math.Max(1, math.Log10(float64(max(n, 1))))
	timeout := time.Duration(float64(c.SuspicionMult) * scale * float64(c.ProbeInterval))
	if k := c.SuspicionMult - 2; k < 1 || n-2 < k {
		return timeout
	}
	return timeout * time.Duration(c.SuspicionMaxTimeoutMult)
}

// FenceClose bounds, for a side of side members of n that must fence, the
// time from the cut to its last device closed with 1001: its decision
// (MinorityDetection; with the lease strategy it asks the store at the
// first tick a propagation later (Arbiter.Delay) and fences at the latest
// twice the arbiter's TTL after finding it held by a member it does not
// reach, DecideArbiter), both goodbyes (FenceLeave), then the drain, which
// closes its devices over spread.
func FenceClose(preset string, n, side int, lease bool, spread time.Duration) time.Duration {
	d := MinorityDetection(preset, n, side) + FenceLeave + spread
	if lease {
		d += Propagation(preset) + FenceTick + 2*FailureDetection(preset, ArbiterMembers)
	}
	return d
}

// WorstMinority is the side, of those that must fence in a cluster of n,
// whose MinorityDetection is the longest: the largest without a majority.
func WorstMinority(n int) int { return n / 2 }

// PushPull is how often each of n members syncs its whole table with a
// random other (memberlist scales the interval above 32 members).
func PushPull(preset string, n int) time.Duration {
	c := profile(preset)
	if n <= 32 {
		return c.PushPullInterval
	}
	return time.Duration(math.Ceil(math.Log2(float64(n))-5)+1) * c.PushPullInterval
}

// Convergence bounds the time from a member's join (its push/pull with
// the seed done) until every member of n sees it alive: its news spreads
// by gossip within a propagation; a member the gossip missed (each news is
// sent RetransmitMult x log10(n+1) times only) learns it at its next
// push/pull with one that knows it.
func Convergence(preset string, n int) time.Duration {
	return Propagation(preset) + PushPull(preset, n)
}

// RejoinWait is the wait between two tries of a fenced node's new
// incarnation (Gossip.rejoin) under way after it has tried for this long:
// one second, doubling after each try, at most rejoinWait. A heal is seen
// by it at its next try, at most this long later.
func RejoinWait(after time.Duration) time.Duration {
	wait, at := time.Second, time.Duration(0)
	for at+wait <= after {
		at += wait
		wait = min(2*wait, rejoinWait)
	}
	return wait
}

// HealConvergence bounds the time from a heal until every member of n
// sees every other alive, for fenced incarnations that have been retrying
// for at most after: their next try, then a join's convergence.
func HealConvergence(preset string, n int, after time.Duration) time.Duration {
	return RejoinWait(after) + Convergence(preset, n)
}
