// Package core is presence as pure state machines: a connection's liveness
// (Conn, with its heartbeat sequence Beats), a device's declared state
// (DeviceState), a device's lease (Lease) and a user's published view
// (View), plus the derived status (Derive), the order of delivery
// (ByDeliverability), privacy trimming and jitter. Nothing here touches
// proto.actor, the network or a clock: every method takes `now` and
// returns what must happen next (a timer to set, an event to deliver),
// which the actors in package actors carry out and which sim
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
// What production runs through core, and what it keeps outside:
//
//   - Heartbeats. Every heartbeat's seq restart and drift fuse are decided
//     by Beats.Beat, which the socket's read runs (actors.Conn.Heartbeat)
//     and the simulator replays through Conn.Heartbeat. One fast path stays
//     outside: the time of life goes into an atomic the gateway's deadline
//     heap reads (actors.liveConn), not into Conn, because a message to
//     the connection actor per heartbeat would cost a mailbox run per beat;
//     the actor copies it into Conn (Conn.Alive) when it checks itself, and
//     decides staleness with Conn.Stale, as the simulator does.
//   - Leases, views, device state and privacy: every decision is a call
//     here (Lease, View, DeviceState, Trim); the actors only carry out
//     what it returns.
//   - Subscriptions: Sink decides what each device is sent and in which
//     order; the fan-out workers write it outside the connection actor,
//     under the connection's lock (see Sink).
//
// None of the types are safe for concurrent use. Conn, Lease, View and
// DeviceState are each owned by one actor; a connection's Beats by its
// socket's reads (one at a time); a Sink by its connection, behind the
// lock its actor and the fan-out workers share.
package core
