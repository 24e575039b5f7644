// Package client is the Go SDK for devices and subscribers of presence.
//
// Conn is one WebSocket connection: Dial it, read frames with Next, send
// heartbeats, subscriptions and status. Session keeps a device online over
// many connections:
//
//	s := client.Start(ctx, client.Config{URLs: []string{"ws://127.0.0.1:7600/ws"}, Token: tok})
//	s.Subscribe("alice", "bob")
//	for ev := range s.Events() { ... }  // snapshots and changes, newest version only
//
// A Session heartbeats on the server's interval shortened at random by up to
// 10%, reconnects with capped exponential backoff and full jitter using an
// attempt number that only grows (also across restarts: it starts from the
// clock in milliseconds), and obeys the close codes: 4001 stops (a newer
// connection of this device took over), 1001 moves to the next URL, 4008
// and resync reconnect and resubscribe, replacing state from the snapshot;
// 4401 (the token expired) reconnects with a token from Config.Refresh, or
// stops with ErrTokenExpired without one. A connection that hears nothing,
// not even a heartbeat ack, for Config.Silence, or that is cut without a
// close frame, moves to the next URL too: its node may have died without
// closing. A handshake refused with 503 or 429 (that node drains, fenced or
// admits no more for now) moves to the next URL at once; the node's
// Retry-After is waited out only once every URL refused since the last
// connection. Keep reading Events: a consumer that stalls stalls the
// connection's reader too, and the node cuts it (4008) until it reads again.
package client
