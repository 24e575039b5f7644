package client

import (
	"testing"

	"github.com/coder/websocket"
	"github.com/presence-im/presence/internal/beatjson"
	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// An ack read on the fast path is the frame protojson reads, and a frame
// the fast path leaves alone (another shape, another kind, a field it does
// not know) still decodes through protojson.
func TestDecodeAckFastPath(t *testing.T) {
	c := &Conn{subprotocol: ProtoJSON}
	for _, in := range []string{
		`{"heartbeat_ack":{"seq":"42","client_ts_ms":"1795947512634","server_ts_ms":"1795947512635"}}`,
		`{"heartbeat_ack":  {"seq":"42", "server_ts_ms":"1795947512635"}}`,
		`{"heartbeat_ack":{"seq":"42","rtt_hint":"1"}}`,
		`{"heartbeatAck":{"seq":"42"}}`,
		`{"resync":{"reason":"view moved"}}`,
	} {
		decodesAsProtojson(t, c, in)
	}
	if _, err := c.decode(websocket.MessageText, []byte(`{"heartbeat_ack":{"seq":"-1"}}`)); err == nil {
		t.Error("a negative seq decoded: want protojson's error")
	}
	// The node's ack takes the fast path: protojson allocates 23 times
	// for it (BenchmarkAckDecode), the fast path's frame 3.
	ack := []byte(`{"heartbeat_ack":{"seq":"42","client_ts_ms":"1795947512634","server_ts_ms":"1795947512635"}}`)
	if n := testing.AllocsPerRun(50, func() { _, _ = c.decode(websocket.MessageText, ack) }); n > 3 {
		t.Errorf("decoding an ack allocated %v times, want at most 3 (the fast path)", n)
	}
}

// decodesAsProtojson fails unless c decodes in to the frame protojson
// reads from it.
func decodesAsProtojson(t *testing.T, c *Conn, in string) {
	t.Helper()
	got, err := c.decode(websocket.MessageText, []byte(in))
	if err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	want := &messages.Frame{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(in), want); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("%s: decoded %v, protojson %v", in, got, want)
	}
}

// BenchmarkHeartbeatEncode is one heartbeat's encoding on a goroutine of
// its own, as a device's beat loop meets it: its stack, shrunk by the
// collections between beats, grows again for protojson's deep calls.
// protojson against the fast path (go test -run '^$' -bench
// HeartbeatEncode -benchmem ./client/).
func BenchmarkHeartbeatEncode(b *testing.B) {
	ack := false
	for _, c := range []struct {
		name   string
		encode func() []byte
	}{
		{"protojson", func() []byte {
			bs, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(&messages.Frame{Kind: &messages.Frame_Heartbeat{
				Heartbeat: &messages.Heartbeat{Seq: 42, ClientTsMs: 1795947512634, Ack: &ack}}})
			return bs
		}},
		{"beatjson", func() []byte {
			var buf [96]byte
			return beatjson.AppendHeartbeat(buf[:0], 42, 1795947512634, beatjson.AckNo)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			done := make(chan int)
			for b.Loop() {
				go func() { done <- len(c.encode()) }()
				<-done
			}
		})
	}
}

// BenchmarkAckDecode is one ack's decoding: protojson against the fast
// path (go test -run '^$' -bench AckDecode -benchmem ./client/).
func BenchmarkAckDecode(b *testing.B) {
	benchDecode(b, `{"heartbeat_ack":{"seq":"42","client_ts_ms":"1795947512634","server_ts_ms":"1795947512635"}}`)
}

// benchDecode is in's decoding by protojson against the SDK's.
func benchDecode(b *testing.B, in string) {
	bs := []byte(in)
	b.Run("protojson", func(b *testing.B) {
		for b.Loop() {
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(bs, &messages.Frame{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("beatjson", func(b *testing.B) {
		c := &Conn{subprotocol: ProtoJSON}
		for b.Loop() {
			if _, err := c.decode(websocket.MessageText, bs); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A change event read on the fast path is the frame protojson reads, and
// one the fast path leaves alone (an escape, a JSON name, an unknown
// field) still decodes through protojson.
func TestDecodeEventFastPath(t *testing.T) {
	c := &Conn{subprotocol: ProtoJSON}
	for _, in := range []string{
		`{"presence":{"user":"bench000001","status":"offline","version":"4","last_seen_minute":29912345}}`,
		`{"presence":{"user":"bob","status":"online","version":"5","show":"available","devices":[{"platform":"other","activity":"active"}]}}`,
		`{"presence":{"user":"bob","status_text":"\"quoted\"\n"}}`,
		`{"presence":{"user":"bob","lastSeenMinute":3}}`,
		`{"presence":{"user":"bob","mood":"fine"}}`,
	} {
		decodesAsProtojson(t, c, in)
	}
	if _, err := c.decode(websocket.MessageText, []byte(`{"presence":{"user":"a","user":"b"}}`)); err == nil {
		t.Error("a field given twice decoded: want protojson's error")
	}
	// The node's event takes the fast path: protojson allocates 30 times
	// for it (BenchmarkEventDecode), the fast path 6.
	ev := []byte(`{"presence":{"user":"bench000001","status":"online","version":"5","show":"available","devices":[{"platform":"other","activity":"active"}]}}`)
	if n := testing.AllocsPerRun(50, func() { _, _ = c.decode(websocket.MessageText, ev) }); n > 6 {
		t.Errorf("decoding an event allocated %v times, want at most 6 (the fast path)", n)
	}
}

// BenchmarkEventDecode is one change event's decoding, the frame a
// subscriber reads for each change of a user it watches: protojson
// against the fast path (go test -run '^$' -bench EventDecode -benchmem
// ./client/).
func BenchmarkEventDecode(b *testing.B) {
	benchDecode(b, `{"presence":{"user":"bench000001","status":"online","version":"5","show":"available","devices":[{"platform":"other","activity":"active"}]}}`)
}
