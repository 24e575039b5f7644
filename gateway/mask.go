package gateway

import (
	"encoding/binary"
	"errors"

	"github.com/lesismal/nbio/nbhttp"
	"github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/presence-im/presence/messages"
)

// Protocol violations in client frame headers (RFC 6455 §5). nbio's parser
// does not check the mask bit, and drops the connection without a close
// frame on the others, so maskGuard watches the frame headers of the byte
// stream on their way to it (it reads only headers and skips payloads; nbio
// still does all parsing) and answers each with a 1002 close frame naming
// it.
var (
	errUnmasked           = errors.New("unmasked frame")
	errReservedBits       = errors.New("reserved bits set (no extension was negotiated)")
	errReservedOpcode     = errors.New("reserved opcode")
	errFragmentedControl  = errors.New("fragmented control frame")
	errLongControl        = errors.New("control frame over 125 bytes")
	errOrphanContinuation = errors.New("continuation frame outside a fragmented message")
	errInterleaved        = errors.New("new data frame inside a fragmented message")
)

// maskGuard stands in for the websocket.Conn as the nbio connection's parser.
type maskGuard struct {
	*websocket.Conn
	sock      *socket
	hdr       [14]byte
	n         int    // header bytes collected
	skip      uint64 // payload bytes still to pass
	fragments bool   // inside a fragmented data message
	inline    bool   // frames are handled on the poller (inlineFrames)
}

// inlineFrames makes the connection's frames run on the epoll goroutine
// that parsed them, once nothing runs on nbio's task pool for it (the
// handshake handler, which blocks on the lease, has returned: nbc's job list
// is empty). Called from the poller's data callback, the only goroutine that
// reads Execute from then on, so frames stay in order and one at a time.
// Every frame handler is short and never blocks (an atomic for a heartbeat,
// a mailbox Send for the rest, a write that nbio queues when the socket is
// full): the task pool's hand-off per frame (a goroutine woken through a
// futex, its stack grown) was a large share of the node's CPU per
// heartbeat (BENCHMARKS.md has the profile). The close still goes through
// the task pool (nbio's
// MustExecute); its handler takes the socket's lock.
func (g *maskGuard) inlineFrames(nbc interface{ ExecuteLen() int }) {
	if g.inline || nbc.ExecuteLen() != 0 {
		return
	}
	g.inline = true
	g.Conn.Execute = nbhttp.SyncExecutor
}

func (g *maskGuard) Parse(data []byte) error {
	if err := g.check(data); err != nil {
		_ = g.Conn.WriteClose(int(messages.CloseProtocolError), err.Error())
		return err
	}
	return g.Conn.Parse(data)
}

// header checks a frame's first two bytes.
func (g *maskGuard) header() error {
	b0, b1 := g.hdr[0], g.hdr[1]
	fin, op := b0&0x80 != 0, b0&0x0f
	switch {
	case b1&0x80 == 0:
		return errUnmasked
	case b0&0x70 != 0:
		return errReservedBits
	case op >= 3 && op <= 7 || op >= 0xb:
		return errReservedOpcode
	case op >= 8 && !fin:
		return errFragmentedControl
	case op >= 8 && b1&0x7f > 125:
		return errLongControl
	case op == 0 && !g.fragments:
		return errOrphanContinuation
	case op != 0 && op < 8 && g.fragments:
		return errInterleaved
	}
	if op < 8 {
		g.fragments = !fin
	}
	return nil
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
		if g.n == 2 {
			if err := g.header(); err != nil {
				return err
			}
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
