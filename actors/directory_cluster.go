package actors

import (
	"context"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
)

// ClusterDirectory reaches lease and view actors as proto.actor virtual
// actors: an identity lives on the member rendezvous hashing picks, and
// moves (re-created empty) when members join or die. PIDs are cached until
// the topology changes.
//
// Actors do not passivate in a cluster: proto.actor delivers a message sent
// to a grain that stopped to dead letters, so an idle actor stays until its
// node stops (see the closing notes of the cluster issue).
type ClusterDirectory struct {
	c     *pcluster.Cluster
	root  *actor.RootContext
	count func(Kind) int
	owner func(Kind, string) string // the owner's address by the provider's hashing
	sub   *eventstream.Subscription

	mu    sync.Mutex
	cache map[string]*actor.PID
}

// NewClusterDirectory makes a directory over a started cluster member.
func NewClusterDirectory(c *pcluster.Cluster, count func(Kind) int, owner func(Kind, string) string) *ClusterDirectory {
	d := &ClusterDirectory{c: c, root: c.ActorSystem.Root, count: count, owner: owner, cache: map[string]*actor.PID{}}
	// Published under proto.actor's member-list lock: only clear the cache.
	d.sub = c.ActorSystem.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*pcluster.ClusterTopology); ok {
			d.mu.Lock()
			clear(d.cache)
			d.mu.Unlock()
		}
	})
	return d
}

// pid resolves an identity. An answer from a member that is not the owner
// by the current hashing (proto.actor's placement not yet updated) is used
// but not cached, so the next send asks again.
func (d *ClusterDirectory) pid(kind Kind, id string) *actor.PID {
	key := string(kind) + "|" + id
	owner := d.owner(kind, id)
	d.mu.Lock()
	pid := d.cache[key]
	d.mu.Unlock()
	if pid != nil && (owner == "" || pid.GetAddress() == owner) {
		return pid
	}
	pid = d.c.Get(id, string(kind)) // asks the owner to activate it
	if pid != nil && (owner == "" || pid.GetAddress() == owner) {
		d.mu.Lock()
		d.cache[key] = pid
		d.mu.Unlock()
	}
	return pid
}

func (d *ClusterDirectory) Send(kind Kind, id string, msg any) {
	if pid := d.pid(kind, id); pid != nil {
		d.root.Send(pid, msg)
	}
}

func (d *ClusterDirectory) Request(ctx context.Context, kind Kind, id string, msg any) (any, error) {
	timeout := requestTimeout(ctx)
	if timeout <= 0 {
		return nil, fmt.Errorf("actors: %s %s: %w", kind, id, context.DeadlineExceeded)
	}
	pid := d.pid(kind, id)
	if pid == nil {
		return nil, fmt.Errorf("actors: %s %s: no member hosts it", kind, id)
	}
	res, err := d.root.RequestFuture(pid, msg, timeout).Result()
	if err != nil {
		d.mu.Lock()
		delete(d.cache, string(kind)+"|"+id)
		d.mu.Unlock()
		return nil, fmt.Errorf("actors: %s %s: %w", kind, id, err)
	}
	return res, nil
}

func (d *ClusterDirectory) Passivate(Kind, string, *actor.PID, uint64) bool { return false }

func (d *ClusterDirectory) Count(kind Kind) int { return d.count(kind) }

func (d *ClusterDirectory) Stop() { d.c.ActorSystem.EventStream.Unsubscribe(d.sub) }
