package actors

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
)

// StatsName is the stats actor's name on every node: it answers CountsQuery
// with the node's live actors, for GET /api/cluster on any node.
const StatsName = "stats"

type statsActor struct{ n *Node }

func (a statsActor) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*messages.CountsQuery); ok {
		out := &messages.NodeCounts{Node: a.n.deps.NodeID, Counts: map[string]int64{}, Renewals: a.n.renewals.Load(), DegradedSinceMs: a.n.degrade.sinceMs(),
			StoreFailing: a.n.storeFailing()}
		for k, v := range a.n.Counts() {
			out.Counts[k] = int64(v)
		}
		ctx.Respond(out)
	}
}

// ClusterStats is what every member said of itself (ClusterCounts).
type ClusterStats struct {
	Counts   map[string]map[string]int // member id -> live actors by kind
	Renewals map[string]uint64         // lease renewals accepted since it started
	// Degraded is, for each member degraded to pull, since when (Unix ms).
	Degraded map[string]int64
	// StoreFailing is, for each member whose store calls fail, the
	// operations failing (store.Health): the store is down for it.
	StoreFailing map[string][]string
	// Missing are members that did not answer in time (their counts are
	// unknown, not zero), in order.
	Missing []string
}

// ClusterCounts asks every alive member for its live actors, in parallel,
// within ctx.
func (n *Node) ClusterCounts(ctx context.Context) ClusterStats {
	counts := map[string]map[string]int{n.deps.NodeID: n.Counts()}
	renewals := map[string]uint64{n.deps.NodeID: n.renewals.Load()}
	degraded, failing := map[string]int64{}, map[string][]string{}
	if ms := n.degrade.sinceMs(); ms != 0 {
		degraded[n.deps.NodeID] = ms
	}
	if ops := n.storeFailing(); len(ops) > 0 {
		failing[n.deps.NodeID] = ops
	}
	var missing []string
	g := n.members
	if g == nil {
		return ClusterStats{Counts: counts, Renewals: renewals, Degraded: degraded, StoreFailing: failing}
	}
	timeout := max(requestTimeout(ctx), time.Millisecond) // proto.actor waits for ever on a negative one
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range g.Members() {
		if m.ID == n.deps.NodeID || m.State != cluster.Alive {
			continue
		}
		meta, ok := g.Meta(m.ID)
		if !ok || meta.Actor == "" {
			continue
		}
		wg.Go(func() {
			res, err := n.root.RequestFuture(actor.NewPID(meta.Actor, StatsName), &messages.CountsQuery{}, timeout).Result()
			mu.Lock()
			defer mu.Unlock()
			if nc, ok := res.(*messages.NodeCounts); err == nil && ok {
				c := map[string]int{}
				for k, v := range nc.GetCounts() {
					c[k] = int(v)
				}
				counts[m.ID], renewals[m.ID] = c, nc.GetRenewals()
				if ms := nc.GetDegradedSinceMs(); ms != 0 {
					degraded[m.ID] = ms
				}
				if ops := nc.GetStoreFailing(); len(ops) > 0 {
					failing[m.ID] = ops
				}
				return
			}
			missing = append(missing, m.ID)
		})
	}
	wg.Wait()
	slices.Sort(missing)
	return ClusterStats{Counts: counts, Renewals: renewals, Degraded: degraded, StoreFailing: failing, Missing: missing}
}

// storeFailing are the store operations failing now (store.FailingOps of
// the node's history store, else its policy store).
func (n *Node) storeFailing() []string {
	if ops := store.FailingOps(n.deps.History); ops != nil {
		return ops
	}
	return store.FailingOps(n.deps.Policies)
}
