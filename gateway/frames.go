package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/internal/beatjson"
	"github.com/presence-im/presence/messages"
	"golang.org/x/time/rate"
)

// clearReadDeadline drops a read deadline nbio's accept path may have set
// after the upgrade: nbio (v1.6.8, AddConnNonTLSNonBlocking) registers an
// accepted connection with epoll and only then sets its HTTP keep-alive
// read deadline (2 x stale), so a handshake answered in between has its
// upgrader's clearing undone, and the device is cut without a close frame
// 2 x stale after it connected (a few in a large bench run; BENCHMARKS.md
// has the count). Liveness is the stale check's, never a read deadline;
// with no deadline set this is a lock and a nil check.
func clearReadDeadline(c *websocket.Conn) {
	if nbc := nbioConn(c); nbc != nil {
		_ = nbc.SetReadDeadline(time.Time{})
	}
}

// monoEpoch is the origin of socket.readAt: a duration since it is read
// on the monotonic clock, in 8 bytes per connection.
var monoEpoch = time.Now()

// sinceRead is the time since the read that carried the frame in hand.
func (s *socket) sinceRead() time.Duration {
	return time.Since(monoEpoch) - time.Duration(s.readAt.Load())
}

func (s *socket) beat(seq uint64) {
	if c := s.conn.Load(); c != nil {
		c.Heartbeat(seq, 0)
	}
}

// heartbeat records a sign of life and, unless the heartbeat asked for
// none (ack false), answers its ack; on the JSON subprotocol the ack is
// written without protojson (internal/beatjson). Liveness is the same either
// way: the beat is recorded before anything is written.
func (s *socket) heartbeat(conn *actors.Conn, seq uint64, clientTS int64, ack beatjson.Ack) {
	conn.Heartbeat(max(seq, 1), clientTS)
	if ack.Wanted() {
		s.ack(seq, clientTS)
	}
	s.s.metrics.beatTime.Observe(s.sinceRead().Seconds())
}

// ack answers a heartbeat.
func (s *socket) ack(seq uint64, clientTS int64) {
	s.s.metrics.acks.Inc()
	now := time.Now().UnixMilli()
	if s.codec.kind == websocket.TextMessage {
		s.write(websocket.TextMessage, beatjson.AppendAck(make([]byte, 0, 96), seq, clientTS, now), true)
		return
	}
	s.Send(&messages.Frame{Kind: &messages.Frame_HeartbeatAck{HeartbeatAck: &messages.HeartbeatAck{
		Seq: seq, ClientTsMs: clientTS, ServerTsMs: now,
	}}})
}

func (s *socket) errorFrame(code messages.ErrorCode, requestID, msg string) {
	s.Send(&messages.Frame{Kind: &messages.Frame_Error{Error: &messages.Error{Code: uint32(code), RequestId: requestID, Message: msg}}})
}

// take takes a token of one of the connection's buckets, made at its
// first use (most devices never send what it bounds); when it is empty,
// it says how long until one is back.
func take(b **rate.Limiter, r float64, burst int, now time.Time) (time.Duration, bool) {
	if *b == nil {
		*b = rate.NewLimiter(rate.Limit(r), burst)
	}
	if (*b).AllowN(now, 1) {
		return 0, true
	}
	need := 1 - (*b).TokensAt(now)
	return time.Duration(need / float64((*b).Limit()) * float64(time.Second)), false
}

func (s *socket) takeSubscribe(now time.Time) (time.Duration, bool) {
	return take(&s.subscribes, s.s.opt.SubscribeRate, s.s.opt.SubscribeBurst, now)
}

func (s *socket) takeQuery(now time.Time) (time.Duration, bool) {
	return take(&s.queries, s.s.opt.QueryRate, s.s.opt.QueryBurst, now)
}

func (s *socket) takeActivity(now time.Time) (time.Duration, bool) {
	return take(&s.activities, s.s.opt.ActivityRate, s.s.opt.ActivityBurst, now)
}

// slowDown refuses a frame over its bucket (what names the frame and the
// flags of its bucket): an error frame 429 with the wait in milliseconds,
// rounded up.
func (s *socket) slowDown(b *rate.Limiter, what, requestID string, wait time.Duration) {
	ms := (wait + time.Millisecond - 1) / time.Millisecond
	s.Send(&messages.Frame{Kind: &messages.Frame_Error{Error: &messages.Error{
		Code: uint32(messages.ErrSlowDown), RequestId: requestID, RetryAfterMs: uint32(max(ms, 1)),
		Message: fmt.Sprintf("%s: more than %v a second (%s-rate, burst %s-burst %d): retry after %d ms",
			what, float64(b.Limit()), bucketFlag[what], bucketFlag[what], b.Burst(), max(ms, 1)),
	}}})
}

// bucketFlag names the flags of the bucket a frame kind is bounded by.
var bucketFlag = map[string]string{"subscribe": "subscribe", "query": "query", "set_activity": "activity", "state_sync": "activity"}

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
		if hb, ok := beatjson.ParseHeartbeat(data); ok {
			sock.errs = 0
			sock.heartbeat(sock.conn.Load(), hb.Seq, hb.TS, hb.Ack)
			return
		}
	}
	f, ok := s.decode(sock, data)
	if !ok {
		return
	}
	conn := sock.conn.Load()
	switch k := f.GetKind().(type) {
	case *messages.Frame_Heartbeat:
		sock.heartbeat(conn, k.Heartbeat.GetSeq(), k.Heartbeat.GetClientTsMs(), beatjson.AckOf(k.Heartbeat.Ack))
	case *messages.Frame_Subscribe:
		s.onSubscribe(sock, kind, data, k.Subscribe)
	case *messages.Frame_Query:
		s.onQuery(sock, k.Query)
	case *messages.Frame_Unsubscribe:
		conn.Unsubscribe(k.Unsubscribe.GetTargets())
	case *messages.Frame_SetStatus:
		st := k.SetStatus
		if err := core.ValidStatus(st.GetShow(), st.GetText(), st.GetExpiresMs(), time.Now()); err != nil {
			sock.errorFrame(messages.ErrBadRequest, "", strings.TrimPrefix(err.Error(), core.ErrBadState.Error()+": "))
		} else {
			conn.SetStatus(st.GetShow(), st.GetText(), st.GetExpiresMs())
		}
	case *messages.Frame_SetActivity:
		s.onActivity(sock, "set_activity", "", k.SetActivity.GetActivity())
	case *messages.Frame_StateSync:
		s.onActivity(sock, "state_sync", k.StateSync.GetNonce(), k.StateSync.GetActivity())
	default:
		sock.errorFrame(messages.ErrBadRequest, "", "unexpected frame from a device")
	}
}

// decode decodes a frame of the connection's subprotocol. An undecodable
// one is answered with an error frame (400), and repeated ones close the
// connection (1002); a binary frame whose only fault is a string that is
// not UTF-8 (proto3 refuses to decode it) is a rule broken, not an
// undecodable frame: 400 naming the field and the rule.
func (s *Server) decode(sock *socket, data []byte) (*messages.Frame, bool) {
	f := &messages.Frame{}
	err := sock.codec.unmarshal(data, f)
	if err == nil {
		sock.errs = 0
		return f, true
	}
	if rule, bad := invalidUTF8(sock.codec, data); bad {
		sock.errs = 0
		sock.errorFrame(messages.ErrBadRequest, "", rule)
		return nil, false
	}
	sock.errs++
	if sock.errs >= s.opt.MaxErrors {
		sock.Close(messages.CloseProtocolError, "undecodable frames")
		return nil, false
	}
	sock.errorFrame(messages.ErrBadRequest, "", "undecodable frame: "+err.Error())
	return nil, false
}

// onSubscribe checks a subscribe's tier (on JSON) and bucket and hands it
// to the connection (the sink checks its targets).
func (s *Server) onSubscribe(sock *socket, kind websocket.MessageType, data []byte, sub *messages.Subscribe) {
	if kind == websocket.TextMessage {
		if name, bad := unknownJSONTier(data); bad {
			sock.errorFrame(messages.ErrBadRequest, sub.GetRequestId(), fmt.Sprintf("subscribe: tier %q: must be realtime or batched", name))
			return
		}
	}
	if wait, ok := sock.takeSubscribe(time.Now()); !ok {
		s.gw.Refused(actors.LimitSubscribeRate)
		sock.slowDown(sock.subscribes, "subscribe", sub.GetRequestId(), wait)
		return
	}
	sock.conn.Load().Subscribe(sub.GetRequestId(), sub.GetTargets(), sub.GetTier())
}

// onQuery hands a query within the connection's bucket to it.
func (s *Server) onQuery(sock *socket, q *messages.Query) {
	if wait, ok := sock.takeQuery(time.Now()); !ok {
		s.gw.Refused(actors.LimitQueryRate)
		sock.slowDown(sock.queries, "query", q.GetRequestId(), wait)
		return
	}
	sock.conn.Load().Query(q.GetRequestId(), q.GetTargets())
}

// unknownJSONTier finds a JSON subscribe's tier name that is none of
// Tier's: protojson, discarding unknown names for newer clients' sake,
// would read it as absent, realtime. A number is left to the sink.
func unknownJSONTier(data []byte) (string, bool) {
	var f struct {
		Subscribe struct {
			Tier json.RawMessage `json:"tier"`
		} `json:"subscribe"`
	}
	var name string
	if json.Unmarshal(data, &f) != nil || json.Unmarshal(f.Subscribe.Tier, &name) != nil {
		return "", false
	}
	_, known := messages.Tier_value[name]
	return name, !known
}

// onActivity checks a set_activity or state_sync (nonce set): an activity
// of the enum, within the connection's activity bucket; a refusal is an
// error frame and changes nothing.
func (s *Server) onActivity(sock *socket, what, nonce string, a messages.Activity) {
	if err := core.ValidActivity(a); err != nil {
		sock.errorFrame(messages.ErrBadRequest, "", what+": "+strings.TrimPrefix(err.Error(), core.ErrBadState.Error()+": "))
		return
	}
	if wait, ok := sock.takeActivity(time.Now()); !ok {
		s.gw.Refused(actors.LimitActivityRate)
		sock.slowDown(sock.activities, what, "", wait)
		return
	}
	conn := sock.conn.Load()
	if what == "state_sync" {
		conn.StateSync(nonce, a)
		return
	}
	conn.SetActivity(a)
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
