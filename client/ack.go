package client

import "time"

// AskEvery is the most heartbeats in a row of which none asks for an ack:
// a connection that hears other frames, and so never goes quiet, still
// gets a round-trip sample (Session.RTT) at least every AskEvery
// heartbeat intervals.
const AskEvery = 10

// AckPolicy decides which heartbeats of one connection ask the node for an
// ack (docs/protocol.md, "Acks on request"): the first, the AskEvery-th
// after the last that asked, and any sent when the connection has heard
// nothing for longer than Interval or than Silence - 1.5 x Interval,
// whichever is less. The next heartbeat comes within an interval (they are
// only ever shortened), so on a connection that hears nothing else an ack
// asked for has at least half an interval to arrive before Silence ends;
// an idle connection asks every other heartbeat. The zero value asks every
// time.
type AckPolicy struct {
	Interval time.Duration // the heartbeat interval (the hello's)
	Silence  time.Duration // how long the connection may hear nothing

	asked bool // some heartbeat asked
	since int  // heartbeats since the last that asked
}

// Ask says whether the next heartbeat asks for an ack, quiet being how long
// the connection has heard nothing (time.Since(Conn.Heard())).
func (p *AckPolicy) Ask(quiet time.Duration) bool {
	p.since++
	if p.Interval > 0 && p.asked && p.since < AskEvery && quiet <= p.quietLimit() {
		return false
	}
	p.asked, p.since = true, 0
	return true
}

// quietLimit is how long the connection may have heard nothing before a
// heartbeat asks.
func (p *AckPolicy) quietLimit() time.Duration {
	return min(p.Interval, p.Silence-3*p.Interval/2)
}
