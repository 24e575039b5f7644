// Package actors runs the core state machines as proto.actor actors. On
// every node:
//
//	gatewayActor (one per node)           leaseActor (one per user/device)
//	  └─ connActor (one per socket)       viewActor (one per user)
//
// The gateway ticks its connections every check period; a connection with
// no heartbeat for longer than stale releases its lease (ping_timeout). Each
// connection renews its own lease on a jittered schedule. A lease expires by
// a self-message scheduled at renewal+TTL and tells the user's view of every
// device up and down; the view debounces the offline and fans trimmed
// events out to subscriber sinks (connection actors, anywhere).
//
// Lease and view actors are reached by identity through a Directory, which
// activates them on first use and lets idle ones passivate without losing a
// message: each node's LocalDirectory activates the ones that live there
// and counts every message sent to them; in a cluster, ClusterDirectory
// sends a message for another member's identity to that member's directory
// host (HostName), which hands it to its LocalDirectory, so the count that
// allows a stop is always taken where the actor lives.
//
// Each actor is a thin adapter over package core: its Receive dispatches
// each message to core.Conn, core.Sink, core.Lease or core.View (or a named
// method that does) and carries out what the core returned: send, arm
// timers, write through to the stores. A verdict by time passes one guard
// first, Node.gate (stall, fence, ownership). What an actor reaches beyond
// its own state is its kind's environment (env.go: leaseEnv, viewEnv,
// connEnv), which the node builds, not the node itself. Time is
// time.Now, so tests drive the actors in testing/synctest bubbles.
package actors
