package gateway

import (
	"strconv"

	"github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/presence-im/presence/messages"
)

// The hello is written once per connect, and protojson's reflection was a
// visible share of a connect's CPU (BENCHMARKS.md, "Connect rate"): on the
// JSON subprotocol it is written as protojson would write it, by hand,
// whenever its strings need no escaping (ids are letters, digits and a few
// marks: core.ValidID), and by protojson otherwise. TestHelloFastPath
// checks that protojson reads back the same frame.

// appendJSONHello appends h as a hello frame the way protojson writes it
// (proto names, 64-bit integers quoted, zero fields left out, the platform
// by its name); ok is false, and nothing is appended, when a string would
// need escaping or the platform has no name.
func appendJSONHello(b []byte, h *messages.Hello) (_ []byte, ok bool) {
	start := len(b)
	b = append(b, `{"hello":{`...)
	comma := false
	key := func(name string) {
		if comma {
			b = append(b, ',')
		}
		comma = true
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
	}
	for _, f := range []struct{ name, v string }{
		{"conn_id", h.GetConnId()}, {"node", h.GetNode()}, {"user", h.GetUser()}, {"device", h.GetDevice()},
	} {
		if f.v == "" {
			continue
		}
		if !plainJSON(f.v) {
			return b[:start], false
		}
		key(f.name)
		b = append(append(append(b, '"'), f.v...), '"')
	}
	if e := h.GetEpoch(); e != 0 {
		key("epoch")
		b = append(strconv.AppendUint(append(b, '"'), e, 10), '"')
	}
	number := func(name string, v uint32) {
		if v != 0 {
			key(name)
			b = strconv.AppendUint(b, uint64(v), 10)
		}
	}
	number("heartbeat_interval_ms", h.GetHeartbeatIntervalMs())
	if c := h.GetHeartbeatClass(); c != "" {
		if !plainJSON(c) {
			return b[:start], false
		}
		key("heartbeat_class")
		b = append(append(append(b, '"'), c...), '"')
	}
	number("stale_ms", h.GetStaleMs())
	number("half_open_bound_ms", h.GetHalfOpenBoundMs())
	number("idle_after_ms", h.GetIdleAfterMs())
	if p := h.GetPlatform(); p != 0 {
		name, known := messages.Platform_name[int32(p)]
		if !known {
			return b[:start], false
		}
		key("platform")
		b = append(append(append(b, '"'), name...), '"')
	}
	return append(b, "}}"...), true
}

// hello writes the connection's hello frame: on the JSON subprotocol by
// appendJSONHello where it can.
func (s *socket) hello(h *messages.Hello) {
	if s.codec.kind == websocket.TextMessage {
		if b, ok := appendJSONHello(make([]byte, 0, 320), h); ok {
			s.write(websocket.TextMessage, b, true)
			return
		}
	}
	s.Send(&messages.Frame{Kind: &messages.Frame_Hello{Hello: h}})
}

// plainJSON says whether s is written in a JSON string as it is: printable
// ASCII without a quote or a backslash (and no HTML-sensitive character,
// which protojson leaves alone but an HTML-escaping encoder would not).
func plainJSON(s string) bool {
	for i := range len(s) {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
