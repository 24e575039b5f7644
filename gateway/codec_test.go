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
