// Package core is presence as pure state machines: a connection's liveness
// (Conn, with its heartbeat sequence Beats), a device's declared state
// (DeviceState), a device's lease (Lease) and a user's published view
// (View), plus the derived status (Derive), the order of delivery
// (ByDeliverability), privacy trimming and jitter. Nothing here touches
// proto.actor, the network or a clock: every method takes `now` and
// returns what must happen next (a timer to set, an event to deliver),
// which the actors in package actors carry out and which internal/sim
// replays in virtual time.
//
// The flow of one device:
//
//	Beats.Beat (every heartbeat: restarts, the drift fuse) ... Conn.Stale(now) -> Lease.Release(ping_timeout)
//	DeviceState.Declare / Lapse -> DeviceState.Fill(holder) -> Lease.Renew -> LeaseResult{Changed}
//	Lease.Acquire / Renew / Release / Expire -> LeaseResult{Up | Down}
//	View.DeviceUp / DeviceDown -> debounce Timer -> View.DebounceFired
//	View.publish -> Derive(status, devices) -> Trim(policy, viewer) -> one Delivery per subscriber
//
// In production the heartbeat path is split where it is read: the socket
// runs Beats and stores the time of life in an atomic, the connection
// actor keeps Conn.LastAlive for its stale check (actors.Conn.Heartbeat);
// the simulator runs both halves here.
//
// None of the types are safe for concurrent use: each is owned by one actor.
package core
