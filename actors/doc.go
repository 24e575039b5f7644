// Package actors runs the core state machines as proto.actor actors. On
// every node:
//
//	gatewayActor (one per node)            leaseActor (one per user/device)
//	  └─ connActor (one per socket)  viewActor (one per user)
//
// The gateway ticks its connections every check period; a connection with
// no heartbeat for longer than stale releases its lease (ping_timeout). Each
// connection renews its own lease on a jittered schedule. A lease expires by
// a self-message scheduled at renewal+TTL and tells the user's view of every
// device up and down; the view debounces the offline and fans trimmed
// events out to subscriber sinks (connection actors (connActor), anywhere).
//
// Lease and view actors are reached by identity through a Directory, which
// activates them on first use and lets idle ones passivate without losing a
// message. Each actor's state machine lives in package core; these types
// only carry out what it returns: send, arm timers, write through to the
// stores. Time is time.Now, so tests drive them in testing/synctest bubbles.
package actors
