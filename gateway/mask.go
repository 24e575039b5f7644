package gateway

import (
	"encoding/binary"
	"errors"

	"github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/presence-im/presence/messages"
)

// errUnmasked: RFC 6455 §5.1, a server must close the connection when a
// client frame is not masked. nbio's parser does not check the mask bit, so
// maskGuard watches the frame headers of the byte stream on their way to it
// (it reads only headers and skips payloads; nbio still does all parsing).
var errUnmasked = errors.New("gateway: unmasked client frame")

// maskGuard stands in for the websocket.Conn as the nbio connection's parser.
type maskGuard struct {
	*websocket.Conn
	sock *socket
	hdr  [14]byte
	n    int    // header bytes collected
	skip uint64 // payload bytes still to pass
}

func (g *maskGuard) Parse(data []byte) error {
	if err := g.check(data); err != nil {
		_ = g.Conn.WriteClose(int(messages.CloseProtocolError), "unmasked frame")
		return err
	}
	return g.Conn.Parse(data)
}

// check advances over data, which continues the stream of earlier calls.
func (g *maskGuard) check(data []byte) error {
	for len(data) > 0 {
		if g.skip > 0 {
			k := min(uint64(len(data)), g.skip)
			g.skip -= k
			data = data[k:]
			continue
		}
		g.hdr[g.n] = data[0]
		g.n++
		data = data[1:]
		if g.n < 2 {
			continue
		}
		if g.hdr[1]&0x80 == 0 {
			return errUnmasked
		}
		need := 2 + 4
		switch g.hdr[1] & 0x7f {
		case 126:
			need += 2
		case 127:
			need += 8
		}
		if g.n < need {
			continue
		}
		switch l := g.hdr[1] & 0x7f; l {
		case 126:
			g.skip = uint64(binary.BigEndian.Uint16(g.hdr[2:4]))
		case 127:
			g.skip = binary.BigEndian.Uint64(g.hdr[2:10])
		default:
			g.skip = uint64(l)
		}
		g.n = 0
	}
	return nil
}
