// Package beatjson writes and reads the heartbeat and its ack on the JSON
// subprotocol without protojson, and reads the change event.
//
// The heartbeat is nearly every frame a device sends and its ack nearly
// every frame a node writes; a subscriber's change events are most of the
// rest it reads. protojson's reflection and allocations on each were a
// large share of the node's CPU and of the Go SDK's (BENCHMARKS.md, the
// profiles), so both ends take a fast path for exactly these frames'
// common shapes and leave every other input to protojson: what a parser
// here accepts, protojson decodes to the same
// frame (the fuzz targets check it), and what it does not accept is
// decoded by protojson as before. What the Append functions write is what
// protojson writes with proto field names (MarshalOptions.UseProtoNames,
// as the node and the SDK marshal: 64-bit integers quoted, zero fields
// left out), without the spaces protojson adds at random.
package beatjson

import (
	"math"
	"strconv"
)

// Ack is a heartbeat's ack field: absent (a client before it), false or
// true. Only false leaves the heartbeat unanswered.
type Ack uint8

// A heartbeat's ack field.
const (
	AckUnset Ack = iota
	AckNo
	AckYes
)

// Wanted says whether the heartbeat is answered with an ack.
func (a Ack) Wanted() bool { return a != AckNo }

// AckOf is the ack field of a decoded heartbeat (nil: absent).
func AckOf(ack *bool) Ack {
	switch {
	case ack == nil:
		return AckUnset
	case *ack:
		return AckYes
	}
	return AckNo
}

// Beat is a heartbeat frame's fields.
type Beat struct {
	Seq uint64
	TS  int64 // client_ts_ms
	Ack Ack
}

// HeartbeatAck is a heartbeat_ack frame's fields.
type HeartbeatAck struct {
	Seq      uint64
	ClientTS int64 // client_ts_ms
	ServerTS int64 // server_ts_ms
}

// ParseHeartbeat reads `{"heartbeat":{"seq":S,"client_ts_ms":T,"ack":A}}`:
// the keys in their proto names, in any order, each at most once, any of
// them may be absent; seq and client_ts_ms bare or quoted decimal integers
// with no sign other than a leading minus on client_ts_ms (not "-0"), no
// leading zero, at most 19 digits, no escape; ack a bare true or false;
// JSON whitespace between tokens. ok is false for anything else.
func ParseHeartbeat(b []byte) (hb Beat, ok bool) {
	p := scanner{b: b}
	if !p.open(`"heartbeat"`) {
		return hb, false
	}
	var haveSeq, haveTS bool
	if !p.members(func() bool { return p.beatField(&hb, &haveSeq, &haveTS) }) {
		return Beat{}, false
	}
	return hb, true
}

// ParseAck reads `{"heartbeat_ack":{"seq":S,"client_ts_ms":C,"server_ts_ms":T}}`
// by the same rules as ParseHeartbeat (a minus only on the two times).
func ParseAck(b []byte) (a HeartbeatAck, ok bool) {
	p := scanner{b: b}
	if !p.open(`"heartbeat_ack"`) {
		return a, false
	}
	var have [3]bool
	if !p.members(func() bool { return p.ackField(&a, &have) }) {
		return HeartbeatAck{}, false
	}
	return a, true
}

// AppendHeartbeat appends the heartbeat frame as protojson writes it with
// proto names. A seq of 20 digits is written right but not read back by
// ParseHeartbeat (protojson reads it).
func AppendHeartbeat(b []byte, seq uint64, clientTS int64, ack Ack) []byte {
	b = append(b, `{"heartbeat":{`...)
	w := fields{b: b}
	w.uint("seq", seq)
	w.int("client_ts_ms", clientTS)
	if ack != AckUnset {
		w.key("ack")
		w.b = strconv.AppendBool(w.b, ack == AckYes)
	}
	return append(w.b, "}}"...)
}

// AppendAck appends the heartbeat_ack frame as protojson writes it with
// proto names.
func AppendAck(b []byte, seq uint64, clientTS, serverTS int64) []byte {
	b = append(b, `{"heartbeat_ack":{`...)
	w := fields{b: b}
	w.uint("seq", seq)
	w.int("client_ts_ms", clientTS)
	w.int("server_ts_ms", serverTS)
	return append(w.b, "}}"...)
}

// fields writes an object's members, a 64-bit integer quoted, a zero left
// out.
type fields struct {
	b     []byte
	comma bool
}

// key writes `"name":`, after a comma unless it is the first.
func (w *fields) key(name string) {
	if w.comma {
		w.b = append(w.b, ',')
	}
	w.comma = true
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, `":`...)
}

func (w *fields) uint(name string, v uint64) {
	if v != 0 {
		w.key(name)
		w.b = append(strconv.AppendUint(append(w.b, '"'), v, 10), '"')
	}
}

func (w *fields) int(name string, v int64) {
	if v != 0 {
		w.key(name)
		w.b = append(strconv.AppendInt(append(w.b, '"'), v, 10), '"')
	}
}

// beatField reads one key and its value of a heartbeat into hb; false for
// a key not of a heartbeat, one seen already, or a value the fast path
// leaves to protojson.
func (p *scanner) beatField(hb *Beat, haveSeq, haveTS *bool) bool {
	switch {
	case !*haveSeq && p.lit(`"seq"`):
		*haveSeq = true
		var ok bool
		hb.Seq, ok = p.uint64()
		return ok
	case !*haveTS && p.lit(`"client_ts_ms"`):
		*haveTS = true
		var ok bool
		hb.TS, ok = p.int64()
		return ok
	case hb.Ack == AckUnset && p.lit(`"ack"`):
		if !p.lit(`:`) {
			return false
		}
		switch {
		case p.lit(`true`):
			hb.Ack = AckYes
		case p.lit(`false`):
			hb.Ack = AckNo
		default:
			return false
		}
		return true
	}
	return false
}

// ackField reads one key and its value of an ack into a; have marks the
// keys seen (seq, client_ts_ms, server_ts_ms).
func (p *scanner) ackField(a *HeartbeatAck, have *[3]bool) bool {
	var ok bool
	switch {
	case !have[0] && p.lit(`"seq"`):
		have[0] = true
		a.Seq, ok = p.uint64()
	case !have[1] && p.lit(`"client_ts_ms"`):
		have[1] = true
		a.ClientTS, ok = p.int64()
	case !have[2] && p.lit(`"server_ts_ms"`):
		have[2] = true
		a.ServerTS, ok = p.int64()
	}
	return ok
}

// scanner is a cursor over one JSON text.
type scanner struct {
	b []byte
	i int
}

// members reads the inner object's members up to its `}`, each with
// field, a comma between two, and then the outer object's end.
func (p *scanner) members(field func() bool) bool {
	return p.items(`}`, field) && p.close()
}

// items reads items with item, a comma between two, up to end (`}` or
// `]`, the opening one read already).
func (p *scanner) items(end string, item func() bool) bool {
	for more := !p.lit(end); more; {
		if !item() {
			return false
		}
		if more = !p.lit(end); more && !p.lit(`,`) {
			return false
		}
	}
	return true
}

// open reads `{` key `:{`, key a quoted name.
func (p *scanner) open(key string) bool {
	return p.lit(`{`) && p.lit(key) && p.lit(`:`) && p.lit(`{`)
}

// close reads the outer object's end, and then nothing but whitespace.
func (p *scanner) close() bool {
	if !p.lit(`}`) {
		return false
	}
	p.space()
	return p.i == len(p.b)
}

func (p *scanner) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

// lit skips whitespace and then s, if s is next.
func (p *scanner) lit(s string) bool {
	p.space()
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// uint64 reads `:` and an unsigned integer of at most 19 digits.
func (p *scanner) uint64() (uint64, bool) {
	v, neg, ok := p.value()
	return v, ok && !neg
}

// int64 reads `:` and a signed 64-bit integer.
func (p *scanner) int64() (int64, bool) {
	v, neg, ok := p.value()
	if !ok || (!neg && v > math.MaxInt64) || (neg && v > 1<<63) {
		return 0, false
	}
	if neg {
		return -int64(v), true // -(1<<63) wraps to itself: MinInt64
	}
	return int64(v), true
}

// value reads `:` and a bare or quoted decimal integer of at most 19
// digits (20 would need an overflow check), a minus only as its first
// character.
func (p *scanner) value() (v uint64, neg, ok bool) {
	if !p.lit(`:`) {
		return 0, false, false
	}
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
