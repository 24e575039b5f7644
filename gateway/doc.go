// Package gateway is the device endpoint of docs/protocol.md: GET /ws on
// --listen, served by nbio's event loop (no goroutine per connection;
// docs/gateway.md says why), beside the browser SDK (/sdk/) and the demo
// app (/demo).
//
// The main flow, one device:
//
//   - Server.serveWS checks the handshake (token, device, attempt,
//     platform and class, the admission rate, draining) and answers a
//     refusal with its HTTP status; an accepted one is handed to
//     actors.Gateway, which starts the device's connection actor, and
//     upgraded with the codec the device offered (JSON or protobuf).
//   - Server.onMessage takes each frame: a heartbeat on the fast path
//     (parsed in place, acked from the socket unless it says ack false,
//     the connection actor told without a message per beat: beatjson,
//     socket.heartbeat and actors.Conn), every other frame decoded and checked against its
//     rate limit and bounds, then given to the connection actor; a bad
//     frame gets an error frame, repeated ones a close.
//   - The socket (socket.go) is the connection's writer: frames from its
//     connection actor and the fan-out go through a bounded queue of
//     Options.Outbox frames; a peer that takes nothing for WriteTimeout or
//     lets the queue fill is closed with 4008.
//   - Server.onClose tells the connection actor how the socket ended; the
//     actors release or keep the lease by the close's kind.
//
// Server.Refuse and Server.Drain stop admissions and spread the closes
// of a node going down over Options.DrainSpread.
package gateway
