package actors

import (
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// births hands an actor spawned from its kind's shared Props what it needs
// to begin with. proto.actor keeps an actor's Props for as long as it
// lives (a restart calls its producer again), so Props made per actor,
// with a producer closing over the actor's identity, cost a Props and a
// closure each, three per device: a large share of a device's live heap
// (BENCHMARKS.md, "RSS and heap per device"). With one Props per kind the
// producer makes a blank actor; its spawner leaves the birth under the
// PID id it is about to spawn, the actor takes it when it starts, and an
// instance about to be replaced by a restart leaves what the next one
// needs there again. An entry lives from a spawn (or a restart) to the
// start that follows. Safe for concurrent use.
type births struct{ m sync.Map } // PID id -> birth

// identity is the birth of a lease or view actor: its directory identity
// and the directory messages it handled before a restart, so that the
// directory's count still matches it (passivation).
type identity struct {
	id       string // a lease's user/device, a view's user
	received uint64
}

// leave leaves the birth of the actor that will have PID id pid.
func (b *births) leave(pid string, birth any) { b.m.Store(pid, birth) }

// forget takes back a birth left for a spawn that failed.
func (b *births) forget(pid string) { b.m.Delete(pid) }

// take is the birth left for the actor that is starting. None is a broken
// invariant: every spawner and restart leaves one.
func (b *births) take(ctx actor.Context) any {
	birth, ok := b.m.LoadAndDelete(ctx.Self().GetId())
	if !ok {
		panic(fmt.Sprintf("actors: %s started with no birth left for it", ctx.Self().GetId()))
	}
	return birth
}

// spawnIdentity spawns the lease or view actor of an identity from its
// kind's shared Props, under the id proto.actor's Spawn would have given it.
func (n *Node) spawnIdentity(kind Kind, id string) *actor.PID {
	name := n.sys.ProcessRegistry.NextId()
	n.births.leave(name, identity{id: id})
	props := n.viewProps
	if kind == KindLease {
		props = n.leaseProps
	}
	pid, err := n.root.SpawnNamed(props, name)
	if err != nil { // NextId is unique: as RootContext.Spawn, a broken invariant
		n.births.forget(name)
		panic(err)
	}
	return pid
}
