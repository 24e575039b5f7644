package gateway

import (
	"testing"

	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// The fast path takes the heartbeats clients send, and leaves to protojson
// every other shape.
func TestParseJSONHeartbeat(t *testing.T) {
	for _, c := range []struct {
		in      string
		seq     uint64
		ts      int64
		fastish bool
	}{
		{`{"heartbeat":{"seq":"42","client_ts_ms":"1795947512634"}}`, 42, 1795947512634, true},
		{` { "heartbeat" : { "client_ts_ms" : 7 , "seq" : 3 } } `, 3, 7, true},
		{`{"heartbeat":{}}`, 0, 0, true},
		{`{"heartbeat":{"client_ts_ms":"-5"}}`, 0, -5, true},
		{`{"heartbeat":{"seq":"18446744073709551615"}}`, 0, 0, false}, // 20 digits: protojson decides
		{`{"heartbeat":{"clientTsMs":"1"}}`, 0, 0, false},             // JSON name: protojson
		{`{"heartbeat":{"seq":"1","seq":"2"}}`, 0, 0, false},
		{`{"heartbeat":{"seq":"01"}}`, 0, 0, false},
		{`{"heartbeat":{"seq":1.0}}`, 0, 0, false},
		{`{"heartbeat":{"seq":"1"},"subscribe":{}}`, 0, 0, false},
		{`{"heartbeat":{"seq":"1"}}x`, 0, 0, false},
		{`{"heartbeat":{"seq":"1\u0030"}}`, 0, 0, false},
	} {
		seq, ts, ok := parseJSONHeartbeat([]byte(c.in))
		if ok != c.fastish || ok && (seq != c.seq || ts != c.ts) {
			t.Errorf("%s: %d %d %v, want %d %d %v", c.in, seq, ts, ok, c.seq, c.ts, c.fastish)
		}
	}
}

// What the fast path accepts, protojson decodes to the same heartbeat.
func FuzzHeartbeatFastPath(f *testing.F) {
	for _, s := range []string{
		`{"heartbeat":{"seq":"42","client_ts_ms":"1795947512634"}}`, `{"heartbeat":{"client_ts_ms":-9223372036854775808}}`,
		`{"heartbeat":{}}`, `{"heartbeat":{"seq":9999999999999999999}}`, `{"heartbeat":{"seq":"1","client_ts_ms":"-0"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		seq, ts, ok := parseJSONHeartbeat(data)
		if !ok {
			return
		}
		fr, err := DecodeFrame(ProtoJSON, data)
		if err != nil {
			t.Fatalf("fast path took %q, protojson refuses it: %v", data, err)
		}
		want := &messages.Frame{Kind: &messages.Frame_Heartbeat{Heartbeat: &messages.Heartbeat{Seq: seq, ClientTsMs: ts}}}
		if !proto.Equal(fr, want) {
			t.Fatalf("%q: fast path %v, protojson %v", data, want, fr)
		}
	})
}

// The ack written without protojson decodes, through protojson, to the
// same frame, zero fields included.
func TestAppendJSONAck(t *testing.T) {
	for _, c := range [][3]int64{{42, 1795947512634, 1795947512635}, {0, 0, 1}, {1, -5, 0}, {0, 0, 0}} {
		b := appendJSONAck(nil, uint64(c[0]), c[1], c[2])
		got := &messages.Frame{}
		if err := protojson.Unmarshal(b, got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		want := &messages.Frame{Kind: &messages.Frame_HeartbeatAck{HeartbeatAck: &messages.HeartbeatAck{Seq: uint64(c[0]), ClientTsMs: c[1], ServerTsMs: c[2]}}}
		if !proto.Equal(got, want) {
			t.Errorf("%s decodes to %v, want %v", b, got, want)
		}
	}
}
