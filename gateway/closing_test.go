package gateway

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
)

// A node that closes first sends one close frame: the peer's answer ends
// the closing handshake, and the node cuts the connection without a
// second (which a browser takes for a protocol error and reports as 1006).
func TestOneCloseFramePerSide(t *testing.T) {
	nd := startNode(t)
	tok := nd.token("alice", "phone")
	conn, r, res := rawHandshake(t, nd, "attempt=1", tok)
	if res.StatusCode != 101 {
		t.Fatalf("handshake: %d", res.StatusCode)
	}
	if op, _ := readFrame(t, r); op != 1 {
		t.Fatalf("first frame opcode %d, want text (hello)", op)
	}
	newer, err := client.Dial(t.Context(), nd.url(), client.DialOptions{Token: tok, Attempt: 2}) // supersedes the first: 4001
	if err != nil {
		t.Fatal(err)
	}
	defer newer.CloseNow()
	for {
		op, body := readFrame(t, r)
		if op != 8 {
			continue
		}
		if code := binary.BigEndian.Uint16(body); code != uint16(messages.CloseSuperseded) {
			t.Fatalf("close code %d, want %d", code, messages.CloseSuperseded)
		}
		break
	}
	answer := []byte{0x88, 0x82, 1, 2, 3, 4, 0x0f ^ 1, 0xa1 ^ 2} // FIN+close, masked, code 4001
	if _, err := conn.Write(answer); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	var b [16]byte
	if n, err := r.Read(b[:]); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("after the close handshake: %d bytes %x, %v; want the connection closed", n, b[:n], err)
	}
}
