package gateway

import (
	"encoding/binary"

	"github.com/lesismal/nbio/nbhttp/websocket"
)

// answerClose is the upgrader's close handler: it answers a peer's close
// frame with one of its own, as RFC 6455 (5.5.1) asks, unless the node
// sent its close frame first (socket.Close: 1001, 4001, 4008, 4401, 4409),
// when the peer's frame is the answer and the closing handshake is over.
// nbio's default handler answers every close frame, so a node that closed
// first sent a second one: Go clients ignore it, but a browser fails the
// connection ("Close received after close") and reports 1006 instead of
// the node's code, which would make the browser SDK reconnect after a
// 4001 and miss every 4401. nbio closes the connection after the handler.
func answerClose(c *websocket.Conn, code int, text string) {
	if sock, ok := c.Session().(*socket); ok && sock.sentClose() {
		return
	}
	if code == 1005 { // no status: an empty close frame
		_ = c.WriteMessage(websocket.CloseMessage, nil)
		return
	}
	buf := make([]byte, 2+len(text))
	binary.BigEndian.PutUint16(buf, uint16(code))
	copy(buf[2:], text)
	_ = c.WriteMessage(websocket.CloseMessage, buf)
}

// sentClose reports whether the node wrote (or, before attach, will
// write) its own close frame on this socket.
func (s *socket) sentClose() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed && s.code != 0
}
