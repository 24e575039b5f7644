package gateway

import (
	"math"
	"strconv"
)

// The heartbeat is nearly every frame a node reads and its ack nearly
// every frame it writes. protojson's reflection and allocations on each
// were a large share of the node's CPU (BENCHMARKS.md, the profile), so
// the JSON subprotocol takes a
// fast path for exactly the heartbeat's common shape and leaves every
// other input to protojson: what the fast path accepts, protojson decodes
// to the same frame (FuzzHeartbeatFastPath checks it), and what it does not
// accept is decoded by protojson as before.

// parseJSONHeartbeat reads `{"heartbeat":{"seq":S,"client_ts_ms":T}}`:
// the keys in their proto names, in any order, each at most once, either
// may be absent; values bare or quoted decimal integers with no sign other
// than a leading minus on client_ts_ms, no leading zero, no escape; JSON
// whitespace between tokens. ok is false for anything else.
func parseJSONHeartbeat(b []byte) (seq uint64, ts int64, ok bool) {
	p := jsonScan{b: b}
	if !p.lit(`{`) || !p.lit(`"heartbeat"`) || !p.lit(`:`) || !p.lit(`{`) {
		return 0, 0, false
	}
	var haveSeq, haveTS bool
	if !p.lit(`}`) {
		for {
			switch {
			case !haveSeq && p.lit(`"seq"`):
				haveSeq = true
				if !p.lit(`:`) {
					return 0, 0, false
				}
				v, neg, ok := p.integer()
				if !ok || neg {
					return 0, 0, false
				}
				seq = v
			case !haveTS && p.lit(`"client_ts_ms"`):
				haveTS = true
				if !p.lit(`:`) {
					return 0, 0, false
				}
				v, neg, ok := p.integer()
				if !ok || (!neg && v > math.MaxInt64) || (neg && v > 1<<63) {
					return 0, 0, false
				}
				ts = int64(v)
				if neg {
					ts = -ts
				}
			default:
				return 0, 0, false
			}
			if p.lit(`}`) {
				break
			}
			if !p.lit(`,`) {
				return 0, 0, false
			}
		}
	}
	if !p.lit(`}`) {
		return 0, 0, false
	}
	p.space()
	return seq, ts, p.i == len(p.b)
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
