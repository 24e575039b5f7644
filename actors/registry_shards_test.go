package actors

import (
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
)

// heapAlloc is the live heap right after two collections (the second
// drops what sync.Pools kept through the first).
func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// registryGrowth registers peaks of ids never seen before in sys's
// registry and removes them, as waves of actors come and go, and tells
// what the registry held after the third peak and after the last, over
// what it held before.
func registryGrowth(sys *actor.ActorSystem, peaks, alive int) (third, last int64) {
	reg := sys.ProcessRegistry
	seq := 0
	ids := make([]*actor.PID, alive)
	before := heapAlloc()
	for w := range peaks {
		for i := range ids {
			seq++
			ids[i], _ = reg.Add(sys.DeadLetter, "$"+strconv.Itoa(seq))
		}
		for i, pid := range ids {
			reg.Remove(pid)
			ids[i] = nil
		}
		if w == 2 {
			third = heapAlloc() - before
		}
	}
	last = heapAlloc() - before
	runtime.KeepAlive(sys) // and its registry, measured
	runtime.KeepAlive(ids)
	return third, last
}

// The process registry's maps follow the most ids alive at once and stop
// growing once that peak came: after three peaks of 4,000 new ids, 21
// more leave it within 16 kB. A node's registry is made so when it
// starts, and the ids registered before the registry moved into fewer
// maps are found after. In proto.actor's 1,024 maps (the
// mutation: a system left as proto.actor makes it) the registry grows
// with every peak, as the most each small map ever held keeps rising.
func TestRegistryMapsFollowThePeak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // a node's own registry is in registryMaps
		e := newEnv(t, config.Fast())
		if n := len(e.n.System().ProcessRegistry.LocalPIDs.LocalPIDs); n != registryMaps {
			t.Fatalf("a node's registry in %d maps, want %d", n, registryMaps)
		}
	})
	sys := quietSystem()
	before, _ := sys.ProcessRegistry.GetLocal("eventstream")
	fewerRegistryMaps(sys, registryMaps)
	if n := len(sys.ProcessRegistry.LocalPIDs.LocalPIDs); n != registryMaps {
		t.Fatalf("registry in %d maps, want %d", n, registryMaps)
	}
	if p, ok := sys.ProcessRegistry.GetLocal("eventstream"); !ok || p != before {
		t.Fatalf("eventstream not found after the move (%v, %v)", p, ok)
	}
	const peaks, alive, slack = 24, 4000, 16 << 10
	third, last := registryGrowth(sys, peaks, alive)
	t.Logf("%d maps: %d kB after the third peak, %d kB after %d", registryMaps, third>>10, last>>10, peaks)
	if last > third+slack {
		t.Fatalf("registry grew %d kB after its third peak, want at most %d", (last-third)>>10, slack>>10)
	}
	third, last = registryGrowth(quietSystem(), peaks, alive)
	t.Logf("proto.actor's maps: %d kB after the third peak, %d kB after %d", third>>10, last>>10, peaks)
	if last <= third+slack {
		t.Fatalf("proto.actor's own registry grew %d kB after its third peak: the test no longer tells the two apart", (last-third)>>10)
	}
}
