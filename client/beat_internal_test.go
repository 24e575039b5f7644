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
	in := []byte(`{"heartbeat_ack":{"seq":"42","client_ts_ms":"1795947512634","server_ts_ms":"1795947512635"}}`)
	b.Run("protojson", func(b *testing.B) {
		for b.Loop() {
			f := &messages.Frame{}
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(in, f); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("beatjson", func(b *testing.B) {
		c := &Conn{subprotocol: ProtoJSON}
		for b.Loop() {
			if _, err := c.decode(websocket.MessageText, in); err != nil {
				b.Fatal(err)
			}
		}
	})
}
