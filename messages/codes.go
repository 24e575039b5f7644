package messages

// CloseCode is a close code of the device WebSocket. This table is the one
// place they are defined: the gateway and the connection actors send them,
// the Go SDK (package client) and the chaos harness read them, and
// docs/protocol.md ("Close codes") lists the same set (a test checks it).
type CloseCode uint16

// The close codes, by what the device should do.
const (
	// CloseGoingAway: node draining or fenced, the connection went stale or
	// lost its lease: reconnect, to another node if possible.
	CloseGoingAway CloseCode = 1001
	// CloseProtocolError: an unmasked frame or another header the protocol
	// forbids (the reason names it), repeated undecodable frames.
	CloseProtocolError CloseCode = 1002
	// CloseWrongType: a frame type that is not the subprotocol's.
	CloseWrongType CloseCode = 1003
	// CloseInvalidData: a text frame that is not UTF-8.
	CloseInvalidData CloseCode = 1007
	// CloseTooBig: a message over MaxMessage (sent by nbio).
	CloseTooBig CloseCode = 1009
	// CloseSuperseded: a newer connection of the same device took over: do
	// not reconnect.
	CloseSuperseded CloseCode = 4001
	// CloseOverflow: the outbox overflowed (the device read too slowly):
	// reconnect and resubscribe.
	CloseOverflow CloseCode = 4008
	// CloseTokenExpired: the connection's token expired: get a new token,
	// then reconnect (the old one answers 401).
	CloseTokenExpired CloseCode = 4401
	// CloseStateSync: the device's heartbeats drifted (seq or client time
	// went backwards three times in a row) and it did not answer the
	// state sync request in time: authenticate again (a new token if the
	// old one may be compromised), then reconnect.
	CloseStateSync CloseCode = 4409
)

// CloseCodes is every close code above, in the order docs/protocol.md
// lists them.
var CloseCodes = []CloseCode{CloseGoingAway, CloseProtocolError, CloseWrongType, CloseInvalidData, CloseTooBig, CloseSuperseded, CloseOverflow, CloseTokenExpired, CloseStateSync}

// MaxMessage is the largest WebSocket message a device may send, in
// bytes: a node closes a connection that sends a larger one with
// CloseTooBig (gateway.Options.MaxMessage defaults to it), and the SDKs
// refuse to send one (client/js/presence.js has it as MAX_MESSAGE; a test
// keeps them equal).
const MaxMessage = 64 << 10

// ErrorCode is the code of an error frame: HTTP-like, as the handshake's
// statuses.
type ErrorCode uint32

// The error frame codes.
const (
	// ErrBadRequest: an undecodable frame or a request that breaks a rule
	// (the message says which).
	ErrBadRequest ErrorCode = 400
	// ErrTooManySubscriptions: the subscribe would take the connection over
	// its subscription limit (--max-subscriptions); nothing of it was
	// subscribed, what was subscribed stays. Unsubscribe first.
	ErrTooManySubscriptions ErrorCode = 413
	// ErrSlowDown: the connection sent subscribes faster than its bucket
	// (--subscribe-rate, --subscribe-burst) allows; nothing of it was
	// subscribed. Retry after the frame's retry_after_ms.
	ErrSlowDown ErrorCode = 429
	// ErrAgain: a query lost its answers to a membership change (a view
	// moved or its node died); nothing is waiting: ask again.
	ErrAgain ErrorCode = 503
)

// ErrorCodes is every error frame code above, in the order
// docs/protocol.md lists them.
var ErrorCodes = []ErrorCode{ErrBadRequest, ErrTooManySubscriptions, ErrSlowDown, ErrAgain}
