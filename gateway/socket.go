package gateway

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/messages"
	"golang.org/x/time/rate"
)

// socket is one device WebSocket as its connActor sees it
// (actors.Socket). Writes never block: nbio queues what the kernel does not
// take. The outbox is what is queued and not yet written to the kernel,
// counted in frames through the engine's written-bytes hook; at Outbox
// frames the next Send reports overflow, and a write deadline cuts a peer
// that stopped reading.
type socket struct {
	s     *Server
	codec codec

	mu      sync.Mutex // orders writes with the outbox bookkeeping
	ws      *websocket.Conn
	early   []earlyMsg // written before the upgrade completed
	ends    []uint64   // cumulative queued bytes at the end of each frame in the outbox
	queued  uint64     // bytes handed to nbio
	armedAt uint64     // bytes written when the write deadline was last armed
	closed  bool
	code    messages.CloseCode // close code and reason, kept when closed before the upgrade
	reason  string

	written atomic.Uint64               // bytes the kernel took (engine hook)
	readAt  atomic.Int64                // the last read's time, since monoEpoch (engine hook)
	conn    atomic.Pointer[actors.Conn] // set once upgraded
	errs    int                         // consecutive undecodable frames (read side only)
	// subscribes is the connection's bucket of subscribe frames
	// (Options.SubscribeRate, SubscribeBurst), made at its first subscribe
	// (read side only).
	subscribes *rate.Limiter
	// activities is the bucket of set_activity and state_sync frames
	// (Options.ActivityRate, ActivityBurst), made at the first (read side
	// only).
	activities *rate.Limiter
	// queries is the bucket of query frames (Options.QueryRate,
	// QueryBurst), made at the first (read side only).
	queries *rate.Limiter
}

type earlyMsg struct {
	kind websocket.MessageType
	b    []byte
}

// wireSize is the size of a server frame carrying n payload bytes, as nbio
// writes it (unmasked, split at maxPayload).
func wireSize(n, maxPayload int) uint64 {
	header := func(n int) int {
		switch {
		case n < 126:
			return 2
		case n <= 65535:
			return 4
		}
		return 10
	}
	if n == 0 {
		return 2
	}
	total := 0
	for n > 0 {
		k := min(n, maxPayload)
		total += header(k) + k
		n -= k
	}
	return uint64(total)
}

// Send queues a frame. It returns false when the outbox is full.
func (s *socket) Send(f *messages.Frame) bool {
	b, err := s.codec.encode(f)
	if err != nil {
		s.s.log.Error("gateway: encoding frame", "err", err)
		return true
	}
	return s.write(s.codec.kind, b, true)
}

// write hands one message to nbio; bounded says whether it counts against
// the outbox (control frames are always let through).
func (s *socket) write(kind websocket.MessageType, b []byte, bounded bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return true // closing: drop quietly
	}
	if s.ws == nil {
		if bounded && len(s.early) >= s.s.opt.Outbox {
			return false
		}
		s.early = append(s.early, earlyMsg{kind, b})
		return true
	}
	w := s.written.Load()
	for len(s.ends) > 0 && s.ends[0] <= w {
		s.ends = s.ends[1:]
	}
	if bounded && len(s.ends) >= s.s.opt.Outbox {
		return false
	}
	backlog := s.queued > w
	s.queued += wireSize(len(b), s.s.maxPayload)
	s.ends = append(s.ends, s.queued)
	if err := s.ws.WriteMessage(kind, b); err != nil {
		return true // the connection is closing; OnClose ends the actor
	}
	// A peer that takes nothing for WriteTimeout is cut: arm the deadline
	// when a backlog starts, and push it back only when the kernel took
	// something since (nbio clears it when the backlog is written).
	if s.queued > s.written.Load() && (!backlog || w > s.armedAt) {
		s.armedAt = w
		_ = s.ws.UnderlayerConn().SetWriteDeadline(time.Now().Add(s.s.opt.WriteTimeout))
	}
	return true
}

// Close writes a close frame and cuts the connection after a grace period
// (a peer that stopped reading never answers it).
func (s *socket) Close(code messages.CloseCode, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed, s.code, s.reason = true, code, reason
	if s.ws == nil {
		return // attach closes it
	}
	s.closeLocked(code, reason)
}

func (s *socket) closeLocked(code messages.CloseCode, reason string) {
	s.s.metrics.closed(code)
	ws := s.ws
	_ = ws.WriteClose(int(code), reason)
	time.AfterFunc(s.s.opt.CloseGrace, func() { _ = ws.Close() })
}

// attach binds the upgraded connection and flushes what came before. It
// reports false when the socket was closed meanwhile (by the actor, or by
// the peer before the session was set): the caller then ends the actor.
func (s *socket) attach(ws *websocket.Conn, conn *actors.Conn) bool {
	s.mu.Lock()
	s.ws = ws
	s.conn.Store(conn)
	early := s.early
	s.early = nil
	if s.closed {
		if s.code != 0 {
			s.closeLocked(s.code, s.reason)
		}
		s.mu.Unlock()
		return false
	}
	s.mu.Unlock()
	for _, m := range early {
		s.write(m.kind, m.b, false)
	}
	return true
}
