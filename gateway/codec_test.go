package gateway

import (
	"bytes"
	"testing"

	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/proto"
)

// One presence event shared by a node's subscribers is encoded once per
// subprotocol: a second socket sending the same Presence gets the same
// bytes back, not a new encoding. Another Presence of the same user (a
// later version) is encoded anew, each subprotocol keeps its own, and every
// result decodes to the frame that was sent.
func TestPresenceEncodedOncePerEvent(t *testing.T) {
	frame := func(p *messages.Presence) *messages.Frame {
		return &messages.Frame{Kind: &messages.Frame_Presence{Presence: p}}
	}
	p1 := &messages.Presence{User: "alice", Status: messages.Status_offline, Version: 1, LastSeenMinute: 7}
	p2 := &messages.Presence{User: "alice", Status: messages.Status_online, Version: 2}
	for _, c := range []codec{jsonCodec, binaryCodec} {
		encode := func(p *messages.Presence) []byte {
			t.Helper()
			b, err := c.encode(frame(p))
			if err != nil {
				t.Fatal(err)
			}
			f := &messages.Frame{}
			if err := c.unmarshal(b, f); err != nil || !proto.Equal(f.GetPresence(), p) {
				t.Fatalf("%s: %q decodes to %v (%v), want %v", c.name, b, f, err, p)
			}
			return b
		}
		a, b := encode(p1), encode(p1)
		if &a[0] != &b[0] {
			t.Fatalf("%s: the same event was encoded twice", c.name)
		}
		if later := encode(p2); bytes.Equal(later, a) {
			t.Fatalf("%s: a later version got the earlier bytes", c.name)
		}
		if again := encode(p1); !bytes.Equal(again, a) {
			t.Fatalf("%s: %q after another event, want %q", c.name, again, a)
		}
	}
	// Not a presence frame: encoded each time.
	ack := &messages.Frame{Kind: &messages.Frame_HeartbeatAck{HeartbeatAck: &messages.HeartbeatAck{Seq: 1}}}
	a, _ := jsonCodec.encode(ack)
	ack.GetHeartbeatAck().Seq = 2
	if b, _ := jsonCodec.encode(ack); bytes.Equal(a, b) {
		t.Fatalf("ack seq 2 encoded as %q", b)
	}
}

// withBadUTF8 is f in wire format with its placeholder "XXXX" replaced by
// four bytes that are not UTF-8 (proto.Marshal refuses to write them).
func withBadUTF8(t *testing.T, f *messages.Frame) []byte {
	t.Helper()
	b, err := proto.Marshal(f)
	if err != nil || !bytes.Contains(b, []byte("XXXX")) {
		t.Fatalf("marshal %v: %v", f, err)
	}
	return bytes.Replace(b, []byte("XXXX"), []byte("a\xff\xfeb"), 1)
}

// A binary frame refused for a string that is not UTF-8 is named by its
// frame and field; a frame that is otherwise broken, or a text frame, is
// not taken for one.
func TestInvalidUTF8Named(t *testing.T) {
	status := withBadUTF8(t, &messages.Frame{Kind: &messages.Frame_SetStatus{SetStatus: &messages.SetStatus{Show: messages.Show_dnd, Text: "XXXX"}}})
	sub := withBadUTF8(t, &messages.Frame{Kind: &messages.Frame_Subscribe{Subscribe: &messages.Subscribe{RequestId: "r1", Targets: []string{"bob", "XXXX"}}}})
	for _, tc := range []struct {
		name string
		c    codec
		b    []byte
		want string
	}{
		{"set_status text", binaryCodec, status, "set_status: text is not valid UTF-8"},
		{"a subscribe's target", binaryCodec, sub, "subscribe: targets is not valid UTF-8"},
		{"truncated before the string", binaryCodec, status[:len(status)-3], ""},
		{"garbage", binaryCodec, []byte{0xff, 0xff, 0xff}, ""},
		{"a text frame", jsonCodec, status, ""},
	} {
		if err := tc.c.unmarshal(tc.b, &messages.Frame{}); err == nil {
			t.Fatalf("%s: decoded", tc.name)
		}
		if got, _ := invalidUTF8(tc.c, tc.b); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
