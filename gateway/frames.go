package gateway

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/messages"
	"golang.org/x/time/rate"
)

// clearReadDeadline drops a read deadline nbio's accept path may have set
// after the upgrade: nbio (v1.6.8, AddConnNonTLSNonBlocking) registers an
// accepted connection with epoll and only then sets its HTTP keep-alive
// read deadline (2 x stale), so a handshake answered in between has its
// upgrader's clearing undone, and the device is cut without a close frame
// 2 x stale after it connected (1 to 3 in 19,000 connections, see
// BENCHMARKS.md). Liveness is the stale check's, never a read deadline;
// with no deadline set this is a lock and a nil check.
func clearReadDeadline(c *websocket.Conn) {
	if nbc := nbioConn(c); nbc != nil {
		_ = nbc.SetReadDeadline(time.Time{})
	}
}

func (s *socket) beat(seq uint64) {
	if c := s.conn.Load(); c != nil {
		c.Heartbeat(seq)
	}
}

// heartbeat records a sign of life and answers its ack; on the JSON
// subprotocol the ack is written without protojson (heartbeat.go).
func (s *socket) heartbeat(conn *actors.Conn, seq uint64, clientTS int64) {
	conn.Heartbeat(max(seq, 1))
	now := time.Now().UnixMilli()
	if s.codec.kind == websocket.TextMessage {
		s.write(websocket.TextMessage, appendJSONAck(make([]byte, 0, 96), seq, clientTS, now), true)
		return
	}
	s.Send(&messages.Frame{Kind: &messages.Frame_HeartbeatAck{HeartbeatAck: &messages.HeartbeatAck{
		Seq: seq, ClientTsMs: clientTS, ServerTsMs: now,
	}}})
}

func (s *socket) errorFrame(code messages.ErrorCode, requestID, msg string) {
	s.Send(&messages.Frame{Kind: &messages.Frame_Error{Error: &messages.Error{Code: uint32(code), RequestId: requestID, Message: msg}}})
}

// takeSubscribe takes a token of the connection's subscribe bucket; when
// it is empty, it says how long until one is back.
func (s *socket) takeSubscribe(now time.Time) (time.Duration, bool) {
	if s.subscribes == nil { // at the first subscribe: most devices never send one
		s.subscribes = rate.NewLimiter(rate.Limit(s.s.opt.SubscribeRate), s.s.opt.SubscribeBurst)
	}
	if s.subscribes.AllowN(now, 1) {
		return 0, true
	}
	need := 1 - s.subscribes.TokensAt(now)
	return time.Duration(need / float64(s.subscribes.Limit()) * float64(time.Second)), false
}

// slowDown refuses a subscribe over the bucket: an error frame 429 with the
// wait in milliseconds, rounded up.
func (s *socket) slowDown(requestID string, wait time.Duration) {
	ms := (wait + time.Millisecond - 1) / time.Millisecond
	s.Send(&messages.Frame{Kind: &messages.Frame_Error{Error: &messages.Error{
		Code: uint32(messages.ErrSlowDown), RequestId: requestID, RetryAfterMs: uint32(max(ms, 1)),
		Message: fmt.Sprintf("subscribe: more than %v a second (subscribe-rate, burst subscribe-burst %d): retry after %d ms",
			float64(s.subscribes.Limit()), s.subscribes.Burst(), max(ms, 1)),
	}}})
}

// onMessage handles one client message: a frame of the connection's
// subprotocol, or a close for the wrong frame type (1003) or repeated
// undecodable frames (1002).
func (s *Server) onMessage(c *websocket.Conn, kind websocket.MessageType, data []byte) {
	sock, ok := c.Session().(*socket)
	if !ok || sock.conn.Load() == nil {
		return // nothing may come before hello; see docs/protocol.md
	}
	clearReadDeadline(c)
	if kind != sock.codec.kind {
		sock.Close(messages.CloseWrongType, "wrong frame type for "+sock.codec.name)
		return
	}
	if kind == websocket.TextMessage && !utf8.Valid(data) { // RFC 6455 §8.1 (nbio's own check answers 1002)
		sock.Close(messages.CloseInvalidData, "text frame is not UTF-8")
		return
	}
	if kind == websocket.TextMessage {
		if seq, ts, ok := parseJSONHeartbeat(data); ok {
			sock.errs = 0
			sock.heartbeat(sock.conn.Load(), seq, ts)
			return
		}
	}
	f := &messages.Frame{}
	if err := sock.codec.unmarshal(data, f); err != nil {
		sock.errs++
		if sock.errs >= s.opt.MaxErrors {
			sock.Close(messages.CloseProtocolError, "undecodable frames")
			return
		}
		sock.errorFrame(messages.ErrBadRequest, "", "undecodable frame: "+err.Error())
		return
	}
	sock.errs = 0
	conn := sock.conn.Load()
	switch k := f.GetKind().(type) {
	case *messages.Frame_Heartbeat:
		sock.heartbeat(conn, k.Heartbeat.GetSeq(), k.Heartbeat.GetClientTsMs())
	case *messages.Frame_Subscribe:
		if wait, ok := sock.takeSubscribe(time.Now()); !ok {
			s.gw.Refused(actors.LimitSubscribeRate)
			sock.slowDown(k.Subscribe.GetRequestId(), wait)
			return
		}
		conn.Subscribe(k.Subscribe.GetRequestId(), k.Subscribe.GetTargets())
	case *messages.Frame_Unsubscribe:
		conn.Unsubscribe(k.Unsubscribe.GetTargets())
	case *messages.Frame_SetStatus:
		if sh := k.SetStatus.GetShow(); sh == messages.Show_show_unspecified || messages.Show_name[int32(sh)] == "" {
			sock.errorFrame(messages.ErrBadRequest, "", "set_status: show must be available, away, dnd or invisible")
		} else {
			conn.SetShow(sh)
		}
	default:
		sock.errorFrame(messages.ErrBadRequest, "", "unexpected frame from a device")
	}
}

// onClose ends the connection's actor: a close the device (or the network)
// initiated releases the lease with reason close; after a close the server
// initiated the actor has already ended and the message goes nowhere.
func (s *Server) onClose(c *websocket.Conn, _ error) {
	sock, ok := c.Session().(*socket)
	if !ok {
		return
	}
	s.mu.Lock()
	delete(s.live, sock)
	s.mu.Unlock()
	sock.mu.Lock()
	sock.closed = true
	if sock.expiry != nil {
		sock.expiry.Stop()
	}
	sock.mu.Unlock()
	if conn := sock.conn.Load(); conn != nil {
		conn.Closed()
	}
}

// Refuse makes new handshakes get 503 and Ready fail, keeping the devices
// connected (a fenced node, before it closes them).
func (s *Server) Refuse() { s.draining.Store(true) }

// Drain refuses new handshakes (503) and closes every device with 1001,
// spread over DrainSpread so they do not all reconnect in the same instant;
// each release has reason close. It returns when all are closed or done is.
func (s *Server) Drain(done <-chan struct{}) {
	s.Refuse()
	s.mu.Lock()
	socks := make([]*socket, 0, len(s.live))
	for sock := range s.live {
		socks = append(socks, sock)
	}
	s.mu.Unlock()
	if len(socks) == 0 {
		return
	}
	step := s.opt.DrainSpread / time.Duration(len(socks))
	for _, sock := range socks {
		sock.Close(messages.CloseGoingAway, "node draining")
		if conn := sock.conn.Load(); conn != nil {
			conn.Closed()
		}
		select {
		case <-done:
			return
		case <-time.After(step):
		}
	}
}

// Live is the number of open device connections.
func (s *Server) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}
