package cluster

import (
	"context"
	"encoding/json"
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
	// Lease: the cluster runs --split-brain lease, where a side at or
	// below half serves while it holds the lease, so fenced nodes that
	// reach a majority of the base together prove nothing.
	Lease bool `json:"lease,omitempty"`
	// Alone, closed by an operator (presencectl serve-alone), makes it
	// serve as a new cluster with whatever members it reaches by then.
	Alone <-chan struct{} `json:"-"`
}

// rejoinWait bounds the back-off between two tries.
const rejoinWait = 15 * time.Second

// Verdict says whether the node may serve, reaching the alive members
// (itself included) at now, of which fenced are new incarnations of fenced
// nodes still waiting (itself among them).
//
// By the majority rule any alive member counts as reached: a member
// restarted under another name stands for one of the base; two fenced
// nodes of a minority still reach no majority together (the serving side
// held more than half of the same base, or half with the oldest member). A
// tie goes to the side holding the base's oldest member; a node alone with
// it waits a stable period after fencing, by when the others decided (a
// younger one partitioned from it lost the tie and fenced).
//
// With the lease, a side at or below half may be the one serving (it holds
// the lease), so fenced nodes reaching a majority together prove nothing,
// and the lease cannot be taken either (the serving side stops renewing it
// once its base drops the fenced members): the node serves once it reaches
// a member that is not fenced, i.e. joins the cluster that serves, or once
// it reaches every member of the base, all fenced: then none serves (every
// node fenced: the store did not answer, or each stalled), and they form
// the cluster anew.
func (r Rejoin) Verdict(alive, fenced []string, now time.Time) Verdict {
	if r.Lease {
		return r.leaseVerdict(alive, fenced)
	}
	v := r.reached(alive)
	oldest := slices.Contains(alive, v.Oldest)
	v.Serve = 2*v.Reach > v.Base || v.Tie() && oldest && (v.Reach > 1 || now.Sub(r.Fenced) >= r.Stable)
	return v
}

// reached is the majority rule's count over the base, any alive member
// counting as reached.
func (r Rejoin) reached(alive []string) Verdict {
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
	return v
}

// leaseVerdict: see Verdict. Reach counts itself and the members that
// serve, unless every member of the base is reached.
func (r Rejoin) leaseVerdict(alive, fenced []string) Verdict {
	all := !slices.ContainsFunc(r.Base, func(m Voter) bool { return !slices.Contains(alive, m.ID) })
	serving := slices.DeleteFunc(slices.Clone(alive), func(id string) bool { return slices.Contains(fenced, id) })
	if all {
		serving = alive
	}
	v := r.reached(serving)
	if !all {
		v.Reach = min(v.Reach+1, v.Base) // itself, fenced
	}
	v.Serve = all || len(serving) > 0
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
		alive, fenced := g.aliveIDs()
		v := r.Verdict(alive, fenced, time.Now())
		if v.Serve {
			g.log.Info("cluster: rejoined: the split-brain resolver lets this node serve", "tries", try, "verdict", v.String())
			return g.served(cfg.Serving)
		}
		g.log.Warn("cluster: fenced: not serving yet; retrying the seeds", "try", try, "next_in", wait, "verdict", v.String(),
			"fenced_members", fenced, "seeds", cfg.Join, "err", fmt.Sprint(err))
		select {
		case <-r.Alone:
			alive, _ := g.aliveIDs()
			g.log.Warn("cluster: fenced: an operator told this node to serve alone", "members", len(alive))
			return g.served(cfg.Serving)
		case <-ctx.Done():
			return fmt.Errorf("cluster: rejoining %v: %w", cfg.Join, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, rejoinWait)
	}
}

// aliveIDs are the names of the members memberlist sees alive, itself
// included, and those of them whose metadata says they are fenced.
func (g *Gossip) aliveIDs() (alive, fenced []string) {
	alive = []string{}
	for _, n := range g.ml.Members() {
		if n.State != memberlist.StateAlive {
			continue
		}
		alive = append(alive, n.Name)
		var m Meta
		if json.Unmarshal(n.Meta, &m) == nil && m.Fenced {
			fenced = append(fenced, n.Name)
		}
	}
	return alive, fenced
}

// served clears the fenced mark from this node's metadata and tells the
// others, so that fenced nodes waiting for a serving member count it.
func (g *Gossip) served(serving func()) error {
	if serving != nil {
		serving() // before any other member may place on it
	}
	g.metaMu.Lock()
	g.self.Fenced = false
	b, err := json.Marshal(g.self)
	if err == nil {
		g.meta = b
	}
	g.metaMu.Unlock()
	if err != nil {
		return err
	}
	if err := g.ml.UpdateNode(time.Second); err != nil {
		g.log.Warn("cluster: rejoined: telling the others this node serves", "err", err)
	}
	return nil
}
