package beatjson

import (
	"math"
	"unicode/utf8"

	"github.com/presence-im/presence/messages"
)

// ParsePresence reads a change event, `{"presence":{...}}`, as the node's
// protojson writes it: the keys in their proto names, in any order, each
// at most once; strings without escapes or control characters, valid
// UTF-8; enums by name; integers bare or quoted as in ParseHeartbeat;
// devices an array of objects of platform and activity. ok is false for
// anything else (a JSON name, null, an escape, an unknown key or enum
// name), which protojson then decodes as before. A subscriber reads one
// of these per change of each target it watches: protojson's 30
// allocations for one are 6 here (client's BenchmarkEventDecode; the
// figures in BENCHMARKS.md, "What limits each figure", one offline).
func ParsePresence(b []byte) (*messages.Presence, bool) {
	p := scanner{b: b}
	if !p.open(`"presence"`) {
		return nil, false
	}
	pr := &messages.Presence{}
	var seen uint8
	if !p.members(func() bool { return p.presenceField(pr, &seen) }) {
		return nil, false
	}
	return pr, true
}

// presenceField reads one key of a Presence and its value; seen has a bit
// per field number already read.
func (p *scanner) presenceField(pr *messages.Presence, seen *uint8) bool {
	var n uint8
	ok := false
	switch {
	case p.lit(`"user"`):
		n = 1
		pr.User, ok = p.str()
	case p.lit(`"status"`):
		var v int32
		n = 2
		v, ok = p.enum(messages.Status_value)
		pr.Status = messages.Status(v)
	case p.lit(`"version"`):
		n = 3
		pr.Version, ok = p.uint64()
	case p.lit(`"last_seen_minute"`):
		n = 4
		pr.LastSeenMinute, ok = p.uint32()
	case p.lit(`"show"`):
		var v int32
		n = 5
		v, ok = p.enum(messages.Show_value)
		pr.Show = messages.Show(v)
	case p.lit(`"devices"`):
		n = 6
		pr.Devices, ok = p.devices()
	case p.lit(`"idle_since_minute"`):
		n = 7
		pr.IdleSinceMinute, ok = p.uint32()
	case p.lit(`"status_text"`):
		n = 8
		pr.StatusText, ok = p.str()
	}
	if !ok || *seen&(1<<(n-1)) != 0 {
		return false
	}
	*seen |= 1 << (n - 1)
	return true
}

// devices reads `:` and an array of DevicePresence objects.
func (p *scanner) devices() ([]*messages.DevicePresence, bool) {
	var ds []*messages.DevicePresence
	ok := p.lit(`:`) && p.lit(`[`) && p.items(`]`, func() bool {
		d, ok := p.device()
		ds = append(ds, d)
		return ok
	})
	return ds, ok
}

// device reads one `{"platform":P,"activity":A}`, either key absent.
func (p *scanner) device() (*messages.DevicePresence, bool) {
	d := &messages.DevicePresence{}
	var havePlatform, haveActivity bool
	ok := p.lit(`{`) && p.items(`}`, func() bool {
		var v int32
		ok := false
		switch {
		case !havePlatform && p.lit(`"platform"`):
			havePlatform = true
			v, ok = p.enum(messages.Platform_value)
			d.Platform = messages.Platform(v)
		case !haveActivity && p.lit(`"activity"`):
			haveActivity = true
			v, ok = p.enum(messages.Activity_value)
			d.Activity = messages.Activity(v)
		}
		return ok
	})
	return d, ok
}

// str reads `:` and a string with no escape and no control character,
// valid UTF-8.
func (p *scanner) str() (string, bool) {
	raw, ok := p.rawString()
	if !ok || !utf8.Valid(raw) {
		return "", false
	}
	return string(raw), true
}

// enum reads `:` and a quoted enum value name known to names.
func (p *scanner) enum(names map[string]int32) (int32, bool) {
	raw, ok := p.rawString()
	if !ok {
		return 0, false
	}
	v, ok := names[string(raw)]
	return v, ok
}

// rawString reads `:` and a quoted string's bytes, refusing an escape or
// a control character (protojson then decides).
func (p *scanner) rawString() ([]byte, bool) {
	if !p.lit(`:`) || !p.lit(`"`) {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			return p.b[start : p.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// uint32 reads `:` and an unsigned 32-bit integer.
func (p *scanner) uint32() (uint32, bool) {
	v, ok := p.uint64()
	if !ok || v > math.MaxUint32 {
		return 0, false
	}
	return uint32(v), true
}
