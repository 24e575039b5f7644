// Package core is presence as pure state machines: a connection's liveness
// (Conn), a device's lease (Lease) and a user's published view (View), plus
// privacy trimming and jitter. Nothing here touches proto.actor, the network
// or a clock: every method takes `now` and returns what must happen next
// (a timer to set, an event to deliver), which the actors in package actors
// carry out and which internal/sim replays in virtual time.
//
// The flow of one device:
//
//	Conn.Beat ... Conn.Stale(now) -> Lease.Release(ping_timeout)
//	Lease.Acquire / Renew / Release / Expire -> LeaseResult{Up | Down}
//	View.DeviceUp / DeviceDown -> debounce Timer -> View.DebounceFired
//	View.publish -> Trim(policy, viewer) -> one Delivery per subscriber
//
// None of the types are safe for concurrent use: each is owned by one actor.
package core
