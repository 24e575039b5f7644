package gateway

import (
	"math"
	"strconv"

	"github.com/presence-im/presence/messages"
)

// The heartbeat is nearly every frame a node reads and its ack nearly
// every frame it writes. protojson's reflection and allocations on each
// were a large share of the node's CPU (BENCHMARKS.md, the profile), so
// the JSON subprotocol takes a
// fast path for exactly the heartbeat's common shape and leaves every
// other input to protojson: what the fast path accepts, protojson decodes
// to the same frame (FuzzHeartbeatFastPath checks it), and what it does not
// accept is decoded by protojson as before.

// askAck is a heartbeat's ack field: absent (a client before it), false
// or true. Only false leaves the heartbeat unanswered.
type askAck uint8

const (
	ackUnset askAck = iota
	ackNo
	ackYes
)

// wanted says whether the heartbeat is answered with an ack.
func (a askAck) wanted() bool { return a != ackNo }

// askOf is a decoded heartbeat's ack field.
func askOf(hb *messages.Heartbeat) askAck {
	switch {
	case hb.Ack == nil:
		return ackUnset
	case *hb.Ack:
		return ackYes
	}
	return ackNo
}

// jsonBeat is a heartbeat as the fast path reads it.
type jsonBeat struct {
	seq uint64
	ts  int64
	ack askAck
}

// parseJSONHeartbeat reads `{"heartbeat":{"seq":S,"client_ts_ms":T,"ack":A}}`:
// the keys in their proto names, in any order, each at most once, any of
// them may be absent; seq and client_ts_ms bare or quoted decimal integers
// with no sign other than a leading minus on client_ts_ms, no leading
// zero, no escape; ack a bare true or false; JSON whitespace between
// tokens. ok is false for anything else.
func parseJSONHeartbeat(b []byte) (hb jsonBeat, ok bool) {
	p := jsonScan{b: b}
	if !p.lit(`{`) || !p.lit(`"heartbeat"`) || !p.lit(`:`) || !p.lit(`{`) {
		return hb, false
	}
	var haveSeq, haveTS bool
	if !p.lit(`}`) {
		for {
			if !p.field(&hb, &haveSeq, &haveTS) {
				return jsonBeat{}, false
			}
			if p.lit(`}`) {
				break
			}
			if !p.lit(`,`) {
				return jsonBeat{}, false
			}
		}
	}
	if !p.lit(`}`) {
		return jsonBeat{}, false
	}
	p.space()
	return hb, p.i == len(p.b)
}

// field reads one key and its value of a heartbeat into hb; false for a
// key not of a heartbeat, one seen already, or a value the fast path
// leaves to protojson.
func (p *jsonScan) field(hb *jsonBeat, haveSeq, haveTS *bool) bool {
	switch {
	case !*haveSeq && p.lit(`"seq"`):
		*haveSeq = true
		if !p.lit(`:`) {
			return false
		}
		v, neg, ok := p.integer()
		hb.seq = v
		return ok && !neg
	case !*haveTS && p.lit(`"client_ts_ms"`):
		*haveTS = true
		if !p.lit(`:`) {
			return false
		}
		v, neg, ok := p.integer()
		if !ok || (!neg && v > math.MaxInt64) || (neg && v > 1<<63) {
			return false
		}
		hb.ts = int64(v)
		if neg {
			hb.ts = -hb.ts
		}
		return true
	case hb.ack == ackUnset && p.lit(`"ack"`):
		if !p.lit(`:`) {
			return false
		}
		switch {
		case p.lit(`true`):
			hb.ack = ackYes
		case p.lit(`false`):
			hb.ack = ackNo
		default:
			return false
		}
		return true
	}
	return false
}

// jsonScan is a cursor over one JSON text.
type jsonScan struct {
	b []byte
	i int
}

func (p *jsonScan) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

// lit skips whitespace and then s, if s is next.
func (p *jsonScan) lit(s string) bool {
	p.space()
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// integer reads a bare or quoted decimal integer of at most 19 digits
// (20 would need an overflow check), a minus only as its first character.
func (p *jsonScan) integer() (v uint64, neg, ok bool) {
	p.space()
	quoted := p.i < len(p.b) && p.b[p.i] == '"'
	if quoted {
		p.i++
	}
	if p.i < len(p.b) && p.b[p.i] == '-' {
		neg = true
		p.i++
	}
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		v = v*10 + uint64(p.b[p.i]-'0')
		p.i++
	}
	n := p.i - start
	if n == 0 || n > 19 || (n > 1 && p.b[start] == '0') || (neg && v == 0) {
		return 0, false, false
	}
	if quoted {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return 0, false, false
		}
		p.i++
	}
	return v, neg, true
}

// appendJSONAck appends the heartbeat_ack frame as protojson writes it
// (proto names, 64-bit integers quoted, zero fields left out).
func appendJSONAck(b []byte, seq uint64, clientTS, serverTS int64) []byte {
	b = append(b, `{"heartbeat_ack":{`...)
	comma := false
	field := func(name string) {
		if comma {
			b = append(b, ',')
		}
		comma = true
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":"`...)
	}
	if seq != 0 {
		field("seq")
		b = strconv.AppendUint(b, seq, 10)
		b = append(b, '"')
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"client_ts_ms", clientTS}, {"server_ts_ms", serverTS}} {
		if f.v != 0 {
			field(f.name)
			b = strconv.AppendInt(b, f.v, 10)
			b = append(b, '"')
		}
	}
	return append(b, "}}"...)
}
