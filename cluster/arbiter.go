package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/presence-im/presence/store"
)

// The lease strategy (--split-brain lease): the majority rule decides
// nothing alone once members become unreachable; a row in the store every
// node shares, the arbiter (store.Arbiter, held by one node at a time: a
// lease in Akka's sense, not a device's core.Lease), does, as Akka's
// lease-majority:
//
//   - while every member of the quorum base is reached, the arbiter is not
//     consulted (nor on any device's path);
//   - once one is not, the side asks for the arbiter: a strict majority at
//     once, a side at or below half (or in doubt of its verdict, doubt.go)
//     after Arbiter.Delay, so that the majority takes it first; the
//     side whose member holds it serves and renews it while members stay
//     unreachable;
//   - a side that finds it held by a member it does not reach waits: a
//     crashed holder renews no more and its arbiter runs out within TTL (the
//     side takes it then); a holder that renewed after this side lost it
//     is alive on the other side, and this side fences;
//   - a store that does not answer: the majority rule decides.
//
// So with the arbiter a 3-node cluster's last survivor serves on, after one
// crash and another or after two at once, as long as it reaches the store.

// Split-brain strategies (--split-brain).
const (
	StrategyMajority = "majority"
	StrategyLease    = "lease"
)

// ArbiterState is what a side knows of the arbiter.
type ArbiterState int

const (
	ArbiterNotAsked ArbiterState = iota // not asked yet (a minority's delay)
	ArbiterOurs                         // held by a member this side reaches
	ArbiterTheirs                       // held, unexpired, by a member it does not reach
	ArbiterUnknown                      // the store did not answer
	ArbiterSkewed                       // this node's clock is past MaxClockSkew off the store's
)

// ArbiterCall is the lease strategy's answer.
type ArbiterCall int

const (
	ArbiterServe ArbiterCall = iota
	ArbiterWait              // undecided: serve on, ask again
	ArbiterFence
)

// ArbiterInput is what DecideArbiter decides on.
type ArbiterInput struct {
	Verdict Verdict // the majority rule's, over the same base
	State   ArbiterState
	// HolderAlive: the arbiter's expiry moved after this side lost its
	// holder (it renewed since: it runs, on the other side).
	HolderAlive bool
	TheirsFor   time.Duration // since this side first found it theirs
	TTL         time.Duration
}

// DecideArbiter is the lease strategy's decision table.
func DecideArbiter(in ArbiterInput) ArbiterCall {
	switch {
	case in.Verdict.Reach == in.Verdict.Base, in.State == ArbiterOurs:
		return ArbiterServe
	case in.State == ArbiterUnknown && in.Verdict.Serve:
		return ArbiterServe
	case in.State == ArbiterUnknown, in.State == ArbiterSkewed:
		return ArbiterFence
	case in.State == ArbiterTheirs && (in.HolderAlive || in.TheirsFor > 2*in.TTL):
		return ArbiterFence
	}
	return ArbiterWait
}

// ArbiterName is the store row the members of a cluster share.
const ArbiterName = "split-brain"

// Arbiter is this node's side of the split-brain arbiter: it takes and
// renews the store's row (store.ArbiterStore) on FenceWatch's behalf. Not
// safe for concurrent use: one FenceWatch calls it.
type Arbiter struct {
	Store  store.ArbiterStore
	Holder string        // this node's id
	TTL    time.Duration // the arbiter's life after each take or renewal
	Delay  time.Duration // how much later than a majority a minority asks
	Log    *slog.Logger
	// Clock is this node's clock, read against the store's before each
	// ask (MaxClockSkew); nil: time.Now. Decide's now is the same clock.
	Clock func() time.Time

	row      store.Arbiter // the arbiter as the store last answered
	state    ArbiterState
	asked    time.Time            // last store call
	below    time.Time            // since when this side is at or below half
	theirs   time.Time            // since when the arbiter is theirs
	lost     map[string]time.Time // since when each unreached member is
	holderUp bool                 // the holder renewed after it was lost
	skew     time.Duration        // the store's clock less ours, at the last ask
}

// MaxClockSkew is how far a node's clock may be off the arbiter store's for
// the node to act on the arbiter: an eighth of its TTL (docs/operations.md,
// "The lease strategy", has it per preset). The arbiter's expiry is written with
// the taker's clock, so a node whose clock is ahead by d sees an arbiter run
// out d early. A live holder renews every TTL/4, each call bounded by
// TTL/4, so its arbiter always has half its TTL left; two nodes each within
// TTL/8 of the store are within TTL/4 of each other, so neither can take
// the arbiter from the other while it lives. Past the limit the node warns,
// leaves the arbiter alone and fences for the split (ArbiterSkewed): unlike a
// store that answers nobody, the store may answer the other side, which
// then takes the arbiter and serves; falling back to the majority rule
// would let both serve.
func MaxClockSkew(ttl time.Duration) time.Duration { return ttl / 8 }

// NewArbiter: TTL the preset's failure detection for n members (a
// crashed holder's arbiter runs out in about the time the others need to
// declare it dead), Delay its gossip propagation.
func NewArbiter(s store.ArbiterStore, holder, preset string, n int, log *slog.Logger) *Arbiter {
	return &Arbiter{Store: s, Holder: holder, TTL: FailureDetection(preset, n), Delay: Propagation(preset), Log: log}
}

// Decide is the lease strategy at now over the majority rule's verdict v on
// base; it asks the store when due (every TTL/4 at most, each call bounded
// by TTL/4 and 500 ms). A side in doubt of a death verdict (Gossip.Doubt:
// not yet confirmed by enough members answering) asks as a side at or
// below half does, after Delay: a node cut off from the others still
// counts a majority between its first verdict and its last, and must not
// take the arbiter before the real majority.
func (a *Arbiter) Decide(now time.Time, v Verdict, base []Voter, inDoubt bool) (ArbiterCall, string) {
	if v.Reach == v.Base {
		a.reset()
		return ArbiterServe, ""
	}
	a.track(now, base)
	below := 2*v.Reach <= v.Base || inDoubt
	switch {
	case !below:
		a.below = time.Time{} // a confirmed majority asks at once
	case a.below.IsZero():
		a.below = now
	}
	majorityFirst := below && now.Sub(a.below) < a.Delay
	if !majorityFirst && (a.asked.IsZero() || now.Sub(a.asked) >= a.TTL/4) {
		a.ask(now, base)
	}
	in := ArbiterInput{Verdict: v, State: a.state, HolderAlive: a.holderUp, TTL: a.TTL}
	if a.state == ArbiterTheirs {
		in.TheirsFor = now.Sub(a.theirs)
	}
	call := DecideArbiter(in)
	return call, a.describe(v)
}

func (a *Arbiter) describe(v Verdict) string {
	switch a.state {
	case ArbiterSkewed:
		return fmt.Sprintf("%s; this node's clock is %v off the lease store's (at most %v): the lease is not this node's to take", v, -a.skew, MaxClockSkew(a.TTL))
	case ArbiterOurs:
		return fmt.Sprintf("%s; the lease is this side's (%s, token %d)", v, a.row.Holder, a.row.Token)
	case ArbiterTheirs:
		return fmt.Sprintf("%s; the lease is held by %s (token %d), which renews it beyond this side's reach", v, a.row.Holder, a.row.Token)
	case ArbiterUnknown:
		return fmt.Sprintf("%s; the lease's store does not answer: the majority rule decides", v)
	}
	return v.String()
}

// reset forgets the split: every member is reached again. The arbiter is
// left to run out.
func (a *Arbiter) reset() {
	a.state, a.asked, a.below, a.theirs, a.holderUp = ArbiterNotAsked, time.Time{}, time.Time{}, time.Time{}, false
	clear(a.lost)
}

// track notes since when each member of base has been unreached.
func (a *Arbiter) track(now time.Time, base []Voter) {
	if a.lost == nil {
		a.lost = map[string]time.Time{}
	}
	for _, m := range base {
		if m.Reached {
			delete(a.lost, m.ID)
		} else if _, ok := a.lost[m.ID]; !ok {
			a.lost[m.ID] = now
		}
	}
}

// ask takes or renews the arbiter and files the answer, once this node's
// clock is found within MaxClockSkew of the store's.
func (a *Arbiter) ask(now time.Time, base []Voter) {
	a.asked = now
	ctx, cancel := context.WithTimeout(context.Background(), min(a.TTL/4, 500*time.Millisecond))
	defer cancel()
	if !a.clockAgrees(ctx) {
		return
	}
	l, err := a.Store.TakeArbiter(ctx, ArbiterName, a.Holder, now, a.TTL)
	if err != nil {
		a.storeDown(err)
		return
	}
	prev := a.state
	a.row, a.state = l, ArbiterTheirs
	for _, m := range base {
		if m.ID == l.Holder && m.Reached {
			a.state = ArbiterOurs
		}
	}
	if a.state == ArbiterTheirs {
		if prev != ArbiterTheirs {
			a.theirs = now
		}
		// a renewal made after this side lost the holder: it runs
		if since, ok := a.lost[l.Holder]; ok && l.Expiry.Add(-a.TTL).After(since) {
			a.holderUp = true
		}
	}
	if prev != a.state && a.Log != nil {
		a.Log.Info("cluster: split-brain lease", "holder", l.Holder, "token", l.Token, "ours", a.state == ArbiterOurs)
	}
}

// clockAgrees reads the store's clock against this node's (halfway
// through the read): past MaxClockSkew the state is ArbiterSkewed, with no
// answer ArbiterUnknown.
func (a *Arbiter) clockAgrees(ctx context.Context) bool {
	clock := a.Clock
	if clock == nil {
		clock = time.Now
	}
	start := time.Now()
	theirs, err := a.Store.ArbiterClock(ctx)
	if err != nil {
		a.storeDown(err)
		return false
	}
	ours := clock().Add(-time.Since(start) / 2)
	a.skew = theirs.Sub(ours)
	if a.skew <= MaxClockSkew(a.TTL) && -a.skew <= MaxClockSkew(a.TTL) {
		return true
	}
	if a.state != ArbiterSkewed && a.Log != nil {
		a.Log.Warn("cluster: split-brain lease: this node's clock is off the store's; it leaves the lease alone and fences for the split",
			"off_by", -a.skew, "limit", MaxClockSkew(a.TTL))
	}
	a.state = ArbiterSkewed
	return false
}

// storeDown files a store that did not answer.
func (a *Arbiter) storeDown(err error) {
	if a.state != ArbiterUnknown && a.Log != nil {
		a.Log.Warn("cluster: split-brain lease: the store does not answer; the majority rule decides", "err", err)
	}
	a.state = ArbiterUnknown
}
