package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
)

// proto.actor's process registry spreads the actors' ids over 1024
// concurrent maps, each made of cmap.SHARD_COUNT Go maps (32 by default):
// 32,768 maps. A Go map keeps the group it allocated on its first insert,
// so as actors of ever new ids come and go every map ends up holding one,
// empty or not: the live heap grew by them over the first wave of the
// churn benchmark and kept them, whatever the actors alive
// (docs/architecture.md, "Memory", has the figure). One Go map per
// concurrent map holds the same ids in 32 times fewer maps. Set in init,
// before any actor system (or the cluster's PID cache, the only other
// user of the package) makes one.
func init() { cmap.SHARD_COUNT = 1 }

// registryMaps is how many concurrent maps (one Go map and one lock each)
// a node's process registry spreads ids over, where proto.actor makes
// 1024. A Go map does not shrink: each keeps the size of the most ids it
// ever held at once. With a few ids a map at a wave's peak, the most each
// of 1024 maps ever held kept rising with the waves (the maximum of many
// small counts), and the live heap of a node with it, wave after wave of a
// long churn. Fewer, larger maps reach the size of the peak within a few
// peaks and stop there (TestRegistryMapsFollowThePeak checks it on a model
// of many peaks of new ids). 64 locks are still many more than the cores that
// contend for them, and a PID caches its process: the registry is read
// when a PID is first resolved, written when an actor starts or stops.
const registryMaps = 64

// fewerRegistryMaps moves sys's process registry into n concurrent maps,
// the ids it holds already included. Call it on a new actor system,
// before anything else uses it: the registry's maps are swapped unlocked.
func fewerRegistryMaps(sys *actor.ActorSystem, n int) {
	sm := &actor.SliceMap{LocalPIDs: make([]cmap.ConcurrentMap, n)}
	for i := range sm.LocalPIDs {
		sm.LocalPIDs[i] = cmap.New()
	}
	for _, m := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		for id, p := range m.Items() {
			sm.GetBucket(id).Set(id, p)
		}
	}
	sys.ProcessRegistry.LocalPIDs = sm
}
