package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
)

// Rejoin is what the new incarnation of a fenced node (see fence.go) knows
// of the one that fenced. Until the resolver lets it serve it retries its
// seeds with a growing back-off, one log line a try.
type Rejoin struct {
	Base   []Voter       `json:"base"`   // the quorum base it fenced on
	Fenced time.Time     `json:"fenced"` // when it fenced
	Stable time.Duration `json:"stable"` // the stable period it decided with
	// Alone, closed by an operator (presencectl serve-alone), makes it
	// serve as a new cluster with whatever members it reaches by then.
	Alone <-chan struct{} `json:"-"`
}

// rejoinWait bounds the back-off between two tries.
const rejoinWait = 15 * time.Second

// Verdict says whether the node may serve, reaching the alive members
// (itself included) at now. Any alive member counts as reached: a member
// restarted under another name stands for one of the base; two fenced
// nodes of a minority still reach no majority together. A tie goes to the
// side holding the base's oldest member; a node alone with it waits a
// stable period after fencing, by when the others decided (a younger one
// partitioned from it lost the tie and fenced).
func (r Rejoin) Verdict(alive []string, now time.Time) Verdict {
	base := slices.Clone(r.Base)
	extra := len(alive)
	for i := range base {
		base[i].Reached = slices.Contains(alive, base[i].ID)
		if base[i].Reached {
			extra--
		}
	}
	v := Decide(base)
	v.Reach = min(v.Reach+extra, v.Base)
	oldest := slices.Contains(alive, v.Oldest)
	v.Serve = 2*v.Reach > v.Base || v.Tie() && oldest && (v.Reach > 1 || now.Sub(r.Fenced) >= r.Stable)
	return v
}

// rejoin tries the seeds until the verdict or an operator lets the node
// serve, resolving their names again on every try (a restarted peer may
// have a new address); it gives up only when cfg.Context ends.
func (g *Gossip) rejoin(cfg GossipConfig) error {
	ctx := cfg.Context
	if ctx == nil {
		ctx = context.Background()
	}
	r, wait := *cfg.Rejoin, time.Second
	for try := 1; ; try++ {
		addrs, err := resolveSeeds(ctx, cfg.Resolve, cfg.Join)
		if len(addrs) > 0 {
			_, err = g.ml.Join(addrs)
		}
		v := r.Verdict(g.aliveIDs(), time.Now())
		if v.Serve {
			g.log.Info("cluster: rejoined: the split-brain resolver lets this node serve", "tries", try, "verdict", v.String())
			return nil
		}
		g.log.Warn("cluster: fenced: not serving yet; retrying the seeds", "try", try, "next_in", wait, "verdict", v.String(),
			"seeds", cfg.Join, "err", fmt.Sprint(err))
		select {
		case <-r.Alone:
			g.log.Warn("cluster: fenced: an operator told this node to serve alone", "members", len(g.aliveIDs()))
			return nil
		case <-ctx.Done():
			return fmt.Errorf("cluster: rejoining %v: %w", cfg.Join, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, rejoinWait)
	}
}

// aliveIDs are the names of the members memberlist sees alive, itself
// included.
func (g *Gossip) aliveIDs() []string {
	out := []string{}
	for _, n := range g.ml.Members() {
		if n.State == memberlist.StateAlive {
			out = append(out, n.Name)
		}
	}
	return out
}
