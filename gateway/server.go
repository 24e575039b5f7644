package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lesismal/nbio"
	"github.com/lesismal/nbio/logging"
	"github.com/lesismal/nbio/nbhttp"
	"github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Options configure the device endpoint. Zero values take the defaults.
type Options struct {
	Listen       string        // host:port of GET /ws
	Outbox       int           // frames queued per connection before 4008; default 64
	WriteTimeout time.Duration // a peer that takes nothing for this long is cut; default 10 s
	CloseGrace   time.Duration // wait for the peer after a close frame; default 1 s
	AdmitRate    float64       // handshakes admitted per second; default 500
	AdmitBurst   int           // default 1000
	MaxMessage   int           // bytes; default 64 KiB (1009 above)
	DrainSpread  time.Duration // SIGTERM closes devices over this long; default 2 s
	MaxErrors    int           // consecutive undecodable frames before 1002; default 3
	SendBuffer   int           // SO_SNDBUF of device sockets in bytes; 0: the kernel's default
	// PreviousSecrets are older token keys still accepted (rotation);
	// tokens are signed with the current one only.
	PreviousSecrets [][]byte
	// Registerer takes the endpoint's metrics; nil: not registered.
	Registerer prometheus.Registerer
}

func (o *Options) defaults() {
	set := func(p *time.Duration, d time.Duration) {
		if *p <= 0 {
			*p = d
		}
	}
	if o.Outbox <= 0 {
		o.Outbox = 64
	}
	set(&o.WriteTimeout, 10*time.Second)
	set(&o.CloseGrace, time.Second)
	set(&o.DrainSpread, 2*time.Second)
	if o.AdmitRate <= 0 {
		o.AdmitRate = 500
	}
	if o.AdmitBurst <= 0 {
		o.AdmitBurst = 1000
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = 64 << 10
	}
	if o.MaxErrors <= 0 {
		o.MaxErrors = 3
	}
}

// Server is a node's device WebSocket endpoint on an nbio engine: no
// goroutine per connection; reads and writes are driven by epoll.
type Server struct {
	opt    Options
	node   string
	timing config.Timing
	gw     *actors.Gateway
	tokens Tokens
	admit  *rate.Limiter
	log    *slog.Logger

	engine     *nbhttp.Engine
	upgrader   *websocket.Upgrader
	maxPayload int

	addr     atomic.Value // string, once listening
	draining atomic.Bool
	started  atomic.Bool
	metrics  *metrics
	mu       sync.Mutex
	live     map[*socket]struct{}
}

// New makes a server for gw. Start listens.
func New(opt Options, gw *actors.Gateway, timing config.Timing, secret []byte, log *slog.Logger) *Server {
	opt.defaults()
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	logging.SetLevel(logging.LevelError) // nbio logs to stdout; errors only
	s := &Server{opt: opt, node: gw.Node(), timing: timing, gw: gw, tokens: Tokens{Key: secret, Previous: opt.PreviousSecrets}, log: log,
		admit: rate.NewLimiter(rate.Limit(opt.AdmitRate), opt.AdmitBurst), live: map[*socket]struct{}{}}
	s.metrics = newMetrics(opt.Registerer, s.Live)
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", s.serveWS)
	s.engine = nbhttp.NewEngine(nbhttp.Config{
		Network: "tcp", Addrs: []string{opt.Listen}, Handler: mux,
		ReleaseWebsocketPayload: true, KeepaliveTime: timing.Stale * 2,
		Listen: func(network, addr string) (net.Listener, error) {
			ln, err := net.Listen(network, addr)
			if err != nil {
				return nil, err
			}
			s.addr.Store(ln.Addr().String())
			return ln, nil
		},
	})
	// nbio hands each accepted socket from its accept goroutine to an epoll
	// poller through the kernel, an edge the race detector cannot see: it
	// then reports the poller reading the connection struct the accept
	// goroutine allocated. An atomic written when the connection is opened
	// (after that allocation, before epoll registration) and read before
	// every data callback makes the edge visible; one atomic load per read.
	s.engine.OnOpen(func(net.Conn) { accepted.Add(1) })
	s.engine.Engine.OnData(func(c *nbio.Conn, data []byte) {
		accepted.Load()
		c.DataHandler()(c, data)
	})
	s.maxPayload = s.engine.MaxWebsocketFramePayloadSize
	s.engine.CheckUtf8 = func([]byte) bool { return true } // nbio says 1002; onMessage checks and says 1007
	s.engine.OnWrittenSize(func(c *nbio.Conn, _ []byte, n int) {
		if g, ok := c.Session().(*maskGuard); ok {
			g.sock.written.Add(uint64(n))
		}
	})
	u := websocket.NewUpgrader()
	u.Engine = s.engine
	u.CheckOrigin = func(*http.Request) bool { return true } // tokens, not origins, authenticate
	u.MessageLengthLimit = opt.MaxMessage
	u.KeepaliveTime = 0 // liveness is the gateway's stale check, not nbio's read deadline
	u.OnMessage(s.onMessage)
	u.OnClose(s.onClose)
	u.SetPingHandler(func(c *websocket.Conn, data string) {
		if sock, ok := c.Session().(*socket); ok {
			sock.beat(0)
			sock.write(websocket.PongMessage, []byte(data), false)
		}
	})
	u.SetPongHandler(func(c *websocket.Conn, _ string) {
		if sock, ok := c.Session().(*socket); ok {
			sock.beat(0)
		}
	})
	s.upgrader = u
	return s
}

// Start listens on Options.Listen.
func (s *Server) Start() error {
	if err := s.engine.Start(); err != nil {
		return err
	}
	s.started.Store(true)
	return nil
}

// ErrNotReady is what Ready returns before Start and once draining.
var ErrNotReady = errors.New("gateway: not taking devices")

// Ready reports whether the gateway takes new devices: it listens and is not
// draining.
func (s *Server) Ready() error {
	switch {
	case !s.started.Load():
		return fmt.Errorf("%w: not listening yet", ErrNotReady)
	case s.draining.Load():
		return fmt.Errorf("%w: draining", ErrNotReady)
	}
	return nil
}

// Addr is the listening address (after Start).
func (s *Server) Addr() string {
	if a, ok := s.addr.Load().(string); ok {
		return a
	}
	return s.opt.Listen
}

// Stop closes the listener and every connection at once.
func (s *Server) Stop() { s.engine.Stop() }

func (s *Server) refuse(w http.ResponseWriter, code int, retryAfter bool, format string, args ...any) {
	s.metrics.handshake(code)
	if retryAfter {
		w.Header().Set("Retry-After", "1")
	}
	http.Error(w, fmt.Sprintf(format, args...), code)
}

// unauthorized answers 401 and closes the connection: a client without a
// token pays a new TCP connection per try instead of pipelining handshakes
// on one.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, err error) {
	r.Close = true
	w.Header().Set("Connection", "close")
	s.refuse(w, http.StatusUnauthorized, false, "%v", err)
}

func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// serveWS runs the contract's handshake checks in order; the first that
// fails answers and nothing is written: no lease, no floor, no actor.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	h := r.Header
	if r.Method != http.MethodGet || !hasToken(h, "Connection", "upgrade") || !hasToken(h, "Upgrade", "websocket") || h.Get("Sec-WebSocket-Key") == "" {
		s.refuse(w, http.StatusBadRequest, false, "not a WebSocket upgrade")
		return
	}
	if h.Get("Sec-WebSocket-Version") != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		s.refuse(w, http.StatusUpgradeRequired, false, "Sec-WebSocket-Version must be 13")
		return
	}
	if s.draining.Load() {
		s.refuse(w, http.StatusServiceUnavailable, true, "node draining: reconnect elsewhere")
		return
	}
	if !s.admit.Allow() {
		s.refuse(w, http.StatusTooManyRequests, true, "too many handshakes: retry later")
		return
	}
	claims, err := s.tokens.Verify(bearer(r))
	if err != nil {
		s.unauthorized(w, r, err)
		return
	}
	attempt, err := strconv.ParseUint(r.URL.Query().Get("attempt"), 10, 64)
	if err != nil || attempt == 0 || attempt > MaxAttempt {
		s.refuse(w, http.StatusBadRequest, false, "attempt must be an integer in [1, %d]", uint64(MaxAttempt))
		return
	}
	c := pickCodec(h)
	sock := &socket{s: s, codec: c}
	connID := s.node + "-" + randomHex(8)
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	conn, err := s.gw.Open(ctx, actors.OpenRequest{User: claims.User, Device: claims.Device, Attempt: attempt, ConnID: connID, Socket: sock})
	switch {
	case errors.Is(err, core.ErrStaleAttempt):
		s.refuse(w, http.StatusConflict, false, "%v", err)
		return
	case err != nil:
		s.refuse(w, http.StatusServiceUnavailable, true, "%v", err)
		return
	}
	resp := http.Header{}
	if offered(h, c.name) {
		resp.Set("Sec-WebSocket-Protocol", c.name)
	}
	ws, err := s.upgrader.Upgrade(w, r, resp)
	if err != nil {
		conn.Closed() // release the lease just taken
		return
	}
	ws.SetSession(sock)
	if nbc := nbioConn(ws); nbc != nil {
		nbc.SetSession(&maskGuard{Conn: ws, sock: sock})
		if s.opt.SendBuffer > 0 {
			_ = nbc.SetWriteBuffer(s.opt.SendBuffer)
		}
	} else {
		s.log.Error("gateway: not an nbio connection: no mask check, no outbox accounting")
	}
	s.metrics.handshake(http.StatusSwitchingProtocols)
	s.mu.Lock()
	s.live[sock] = struct{}{}
	s.mu.Unlock()
	if closed, _ := nbioClosed(ws); closed {
		sock.mu.Lock()
		sock.closed = true // the peer left before the session was set
		sock.mu.Unlock()
	}
	if !sock.attach(ws, conn) {
		s.mu.Lock()
		delete(s.live, sock)
		s.mu.Unlock()
		conn.Closed()
		return
	}
	sock.expireAt(claims.Expires)
	sock.Send(&messages.Frame{Kind: &messages.Frame_Hello{Hello: &messages.Hello{
		ConnId: connID, Node: s.node, User: claims.User, Device: claims.Device, Epoch: attempt,
		HeartbeatIntervalMs: uint32(s.timing.Heartbeat.Milliseconds()),
	}}})
}

// MaxAttempt is the largest ?attempt= accepted: 2^53 - 1, the largest
// integer every JSON client reads exactly (the attempt is the hello's
// epoch) and far below the store's int64.
const MaxAttempt = 1<<53 - 1

// accepted counts opened sockets; see the OnData hook in New.
var accepted atomic.Uint64

// nbioClosed reports whether the poller already closed the connection.
func nbioClosed(ws *websocket.Conn) (bool, error) {
	if nbc := nbioConn(ws); nbc != nil {
		return nbc.IsClosed()
	}
	return false, nil
}

// nbioConn finds the poller's connection under an upgraded one.
func nbioConn(ws *websocket.Conn) *nbio.Conn {
	switch c := ws.UnderlayerConn().(type) {
	case *nbio.Conn:
		return c
	case *nbhttp.Conn:
		nc, _ := c.Conn.(*nbio.Conn)
		return nc
	}
	return nil
}

func bearer(r *http.Request) string {
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return r.URL.Query().Get("token")
}

// pickCodec takes the first subprotocol the client offers that the server
// speaks; with none, JSON.
func pickCodec(h http.Header) codec {
	for _, v := range h.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			switch strings.TrimSpace(p) {
			case ProtoJSON:
				return jsonCodec
			case ProtoBinary:
				return binaryCodec
			}
		}
	}
	return jsonCodec
}

func offered(h http.Header, name string) bool { return hasToken(h, "Sec-WebSocket-Protocol", name) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
