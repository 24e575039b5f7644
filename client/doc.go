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
// clock in milliseconds), the backoff starting again only after a healthy
// connection (a heartbeat acked, or one interval lasted: a node that
// closes every connection at once, 1002 to 1009, is dialed less and less
// often), and obeys the close codes: 4001 stops (a newer
// connection of this device took over), 1001 moves to the next URL, 4008
// and resync reconnect and resubscribe, replacing state from the snapshot;
// 4401 (the token expired) reconnects with a token from Config.Refresh, or
// stops with ErrTokenExpired without one. A connection that hears nothing,
// not even a heartbeat ack, for Config.Silence, or that is cut without a
// close frame, moves to the next URL too: its node may have died without
// closing. Heartbeats ask the node for an ack only as AckPolicy says
// (docs/protocol.md, "Acks on request"): the first of a connection, every
// AskEvery-th (Session.RTT keeps the round trip), and any sent after
// hearing nothing for over an interval, so an idle connection asks every
// other heartbeat and a live node's ack still comes within Silence; a node
// before the field acks them all. Conn.Heartbeat sends no field (every
// heartbeat acked, as before), Conn.HeartbeatAsk sets it. A handshake refused with 503 or 429 (that node drains, fenced or
// admits no more for now) moves to the next URL at once; the node's
// Retry-After is waited out only once every URL refused since the last
// connection. Keep reading Events: a consumer that stalls stalls the
// connection's reader too, and the node cuts it (4008) until it reads again.
//
// Device state (docs/protocol.md, "Device state"): Config.Platform and
// Config.Class (battery: a longer heartbeat interval, the hello's) go with
// every handshake, and so does the declared activity, Config.Activity at
// first and SetActivity's after:
//
//	s := client.Start(ctx, client.Config{URLs: urls, Token: tok,
//		Platform: messages.Platform_desktop, Activity: messages.Activity_active})
//	s.SetActivity(messages.Activity_idle)       // no input for a while
//	s.SetActivity(messages.Activity_active)     // input again: sent at once
//	s.SetStatusText(client.Status{Show: messages.Show_dnd, Text: "in a meeting", Expires: end})
//	p, _ := s.State("bob")                       // p.Show, p.StatusText, p.Devices, p.IdleSinceMinute
//
// SetActivity sends only changes; while the activity is active the session
// declares it again every half of the node's idle-after (the hello's
// idle_after_ms), so the node never turns an app in use idle; a
// set_activity the node refuses for its rate (429) is sent again after the
// frame's retry_after_ms. A Config.Activity of 0 declares nothing, and the
// device counts as active while connected, as a client of an earlier
// version does. The session answers a state_sync_request (the node saw
// its heartbeats drift) with the nonce and its activity; a close with 4409
// (no answer in time) reconnects with a token from Config.Refresh, or
// stops with ErrReauthenticate. SetStatusText refuses what the node would
// (a text over 140 characters, not UTF-8, an expiry in the past), naming
// the rule, and the status is told again after every reconnect until it
// expires.
//
// Tiers, queries and degraded mode (docs/protocol.md, "Tiers", "Degraded
// mode"): a contact list subscribes batched, a chat partner in real time,
// and a group page queries once when it opens:
//
//	s.SubscribeTier(messages.Tier_batched, contacts...) // merged, once per the node's batch window
//	s.Subscribe(partner)                                // every change at once
//	members, err := s.Query(ctx, group...)              // one answer, nothing subscribed
//
// A presence_batch is delivered as one Event per presence it holds, with the
// same version rule. Subscriptions go, and go again after every reconnect,
// a request per tier and per 1000 targets or 64 KiB (messages.MaxMessage:
// 1000 ids of 128 characters take two); Conn.Send refuses a larger frame
// with ErrTooLarge (a Query of them), nothing sent. Query returns the presences this
// user may see (a hidden target is absent), leaves State alone, fails with
// ErrNotConnected between connections and ErrConnectionLost when its
// connection ends before the answer, and returns the node's refusal as a
// *ServerError (429: RetryAfter; 503: the membership changed before every
// answer came, ask again). When a node's fan-out falls behind it
// degrades batched targets to pull: the session then queries them itself
// at the pace the node gives (Pulling lists them) until the node restores
// push, whose snapshot replaces their state.
package client
