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
	"net/url"
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

// Options configure the device endpoint. Zero values take those of
// DefaultOptions.
type Options struct {
	Listen string // host:port of GET /ws
	// Gateway is what an operator tunes (flags, YAML, environment).
	config.Gateway
	CloseGrace time.Duration // wait for the peer after a close frame
	MaxMessage int           // bytes; a message above is closed with 1009 (default messages.MaxMessage)
	MaxErrors  int           // consecutive undecodable frames before 1002
	// PreviousSecrets are older token keys still accepted (rotation);
	// tokens are signed with the current one only.
	PreviousSecrets [][]byte
	// Registerer takes the endpoint's metrics; nil: not registered.
	Registerer prometheus.Registerer
}

// DefaultOptions are the endpoint's defaults, the one place they are set:
// 64 frames of outbox, a peer cut after 10 s without taking anything, 500
// handshakes a second in bursts of 1000, a drain spread over 2 s, 5
// subscribe frames a second per connection in bursts of 10, 1 set_activity
// or state_sync a second in bursts of 5, 1 query a second in bursts of 5,
// 1 s of close
// grace, messages of at most 64 KiB, 3 undecodable frames in a row;
// SendBuffer 0 keeps the kernel's.
func DefaultOptions() Options {
	return Options{
		Gateway: config.Gateway{
			Outbox: 64, WriteTimeout: 10 * time.Second, AdmitRate: 500, AdmitBurst: 1000, DrainSpread: 2 * time.Second,
			SubscribeRate: 5, SubscribeBurst: 10, ActivityRate: 1, ActivityBurst: 5, QueryRate: 1, QueryBurst: 5,
		},
		CloseGrace: time.Second, MaxMessage: messages.MaxMessage, MaxErrors: 3,
	}
}

func (o *Options) defaults() {
	d := DefaultOptions()
	orDefault(&o.Outbox, d.Outbox)
	orDefault(&o.WriteTimeout, d.WriteTimeout)
	orDefault(&o.AdmitRate, d.AdmitRate)
	orDefault(&o.AdmitBurst, d.AdmitBurst)
	orDefault(&o.DrainSpread, d.DrainSpread)
	orDefault(&o.SubscribeRate, d.SubscribeRate)
	orDefault(&o.SubscribeBurst, d.SubscribeBurst)
	orDefault(&o.ActivityRate, d.ActivityRate)
	orDefault(&o.ActivityBurst, d.ActivityBurst)
	orDefault(&o.QueryRate, d.QueryRate)
	orDefault(&o.QueryBurst, d.QueryBurst)
	orDefault(&o.CloseGrace, d.CloseGrace)
	orDefault(&o.MaxMessage, d.MaxMessage)
	orDefault(&o.MaxErrors, d.MaxErrors)
}

func orDefault[T int | float64 | time.Duration](p *T, d T) {
	if *p <= 0 {
		*p = d
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
	// accepted counts opened sockets; see the OnData hook in New.
	accepted atomic.Uint64
}

// New makes a server for gw. Start listens.
func New(opt Options, gw *actors.Gateway, timing config.Timing, secret []byte, log *slog.Logger) *Server {
	opt.defaults()
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	quietNbio.Do(func() { logging.SetLevel(logging.LevelError) })
	s := &Server{opt: opt, node: gw.Node(), timing: timing, gw: gw, tokens: Tokens{Key: secret, Previous: opt.PreviousSecrets}, log: log,
		admit: rate.NewLimiter(rate.Limit(opt.AdmitRate), opt.AdmitBurst), live: map[*socket]struct{}{}}
	s.metrics = newMetrics(opt.Registerer, s.Live)
	s.maxPayload = nbhttp.DefaultMaxWebsocketFramePayloadSize // the engine's (newEngine leaves it)
	return s
}

// newEngine is the nbio engine serving GET /ws on ln, bound by Start, and
// the browser SDK and demo page (routes, sdk.go).
func (s *Server) newEngine(ln net.Listener) *nbhttp.Engine {
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", s.serveWS)
	s.routes(mux)
	e := nbhttp.NewEngine(nbhttp.Config{
		Network: "tcp", Addrs: []string{s.opt.Listen}, Handler: mux,
		ReleaseWebsocketPayload: true, KeepaliveTime: s.timing.Stale * 2,
		Listen: func(string, string) (net.Listener, error) { return ln, nil },
	})
	// nbio hands each accepted socket from its accept goroutine to an epoll
	// poller through the kernel, an edge the race detector cannot see: it
	// then reports the poller reading the connection struct the accept
	// goroutine allocated. An atomic written when the connection is opened
	// (after that allocation, before epoll registration) and read before
	// every data callback makes the edge visible; one atomic load per read.
	e.OnOpen(func(net.Conn) { s.accepted.Add(1) })
	e.Engine.OnData(func(c *nbio.Conn, data []byte) {
		s.accepted.Load()
		if g, ok := c.Session().(*maskGuard); ok {
			g.sock.readAt.Store(int64(time.Since(monoEpoch)))
			g.inlineFrames(c)
		}
		c.DataHandler()(c, data)
	})
	e.CheckUtf8 = func([]byte) bool { return true } // nbio says 1002; onMessage checks and says 1007
	e.OnWrittenSize(func(c *nbio.Conn, _ []byte, n int) {
		if g, ok := c.Session().(*maskGuard); ok {
			g.sock.written.Add(uint64(n))
		}
	})
	return e
}

// newUpgrader upgrades handshakes on the engine and hands frames, pings and
// pongs to the sockets.
func (s *Server) newUpgrader() *websocket.Upgrader {
	u := websocket.NewUpgrader()
	u.Engine = s.engine
	u.CheckOrigin = func(*http.Request) bool { return true } // tokens, not origins, authenticate
	u.MessageLengthLimit = s.opt.MaxMessage
	u.KeepaliveTime = 0 // liveness is the gateway's stale check, not nbio's read deadline
	u.OnMessage(s.onMessage)
	u.OnClose(s.onClose)
	u.SetCloseHandler(answerClose) // one close frame per side (closing.go)
	u.SetPingHandler(func(c *websocket.Conn, data string) {
		if sock, ok := c.Session().(*socket); ok {
			clearReadDeadline(c)
			sock.beat(0)
			sock.write(websocket.PongMessage, []byte(data), false)
		}
	})
	u.SetPongHandler(func(c *websocket.Conn, _ string) {
		if sock, ok := c.Session().(*socket); ok {
			clearReadDeadline(c)
			sock.beat(0)
		}
	})
	return u
}

// Start listens on Options.Listen.
//
// The address is bound here, before the nbio engine exists: nbio v1.6.8's
// engine, failing to bind, stops itself and waits for poller goroutines it
// never started, so Start hung for ever on an address another process
// holds (a node that neither listened nor exited).
//
// Accepted sockets get no TCP keep-alive. Go's listener turns it on by
// default, probing after 15 s idle and every 15 s after: a battery-class
// device, which heartbeats every 2 minutes by default to keep its radio
// asleep, was woken about every 15 s in between, and it took four
// setsockopt calls per connection, about a sixth of a handshake's system
// calls. Liveness is the stale check, whose half-open bounds are the
// published ones (docs/protocol.md, heartbeat classes); a dead
// battery-class peer, which keep-alive's probes gave up on after 150 s,
// is now found at its own bound (325 s by default), as documented.
func (s *Server) Start() error {
	ln, err := (&net.ListenConfig{KeepAlive: -1}).Listen(context.Background(), "tcp", s.opt.Listen)
	if err != nil {
		return fmt.Errorf("gateway: listen %s: %w", s.opt.Listen, err)
	}
	s.addr.Store(ln.Addr().String())
	s.engine = s.newEngine(ln)
	s.upgrader = s.newUpgrader()
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
func (s *Server) Stop() {
	if s.engine != nil {
		s.engine.Stop()
	}
}

// handshakeWait bounds a handshake's wait for its lease (a slow or paused
// store delays its floor; config.Timing.HandshakeWait).
func (s *Server) handshakeWait() time.Duration { return s.timing.HandshakeWait() }

// refuse answers a handshake with code and closes the connection, so that
// the client's next attempt comes on a new one: nbio's read deadline on a
// kept-alive connection runs from this answer, and a next handshake
// waiting on a slow store would be cut unanswered, which an HTTP client
// (Go's) answers by sending the same attempt again (docs/operations.md,
// "The store down, paused or slow").
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, code int, retryAfter bool, format string, args ...any) {
	s.metrics.handshake(code)
	r.Close = true
	w.Header().Set("Connection", "close")
	if retryAfter {
		w.Header().Set("Retry-After", "1")
	}
	http.Error(w, fmt.Sprintf(format, args...), code)
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

// serveWS runs the handshake checks of docs/protocol.md in order; the
// first that fails answers and nothing is written: no lease, no floor, no
// actor.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query() // parsed once: a map per parse, on every connect
	claims, attempt, ok := s.check(w, r, q)
	if !ok {
		return
	}
	dev, ok := s.deviceParams(w, r, q)
	if !ok {
		return
	}
	c := pickCodec(r.Header)
	sock := &socket{s: s, codec: c}
	connID := s.node + "-" + randomHex(8)
	ctx, cancel := context.WithTimeout(r.Context(), s.handshakeWait())
	defer cancel()
	conn, err := s.gw.Open(ctx, actors.OpenRequest{User: claims.User, Device: claims.Device, Attempt: attempt, ConnID: connID, Socket: sock,
		Platform: dev.platform, Activity: dev.activity, Class: dev.class.Name, Expires: claims.Expires})
	switch {
	case errors.Is(err, core.ErrStaleAttempt):
		s.refuse(w, r, http.StatusConflict, false, "%v", err)
		return
	case errors.Is(err, actors.ErrTooManyDevices):
		s.refuse(w, r, http.StatusForbidden, false, "%v", err)
		return
	case err != nil:
		s.refuse(w, r, http.StatusServiceUnavailable, true, "%v", err)
		return
	}
	uncork := corkHandshake(w)
	defer uncork()
	if !s.upgrade(w, r, sock, conn) {
		return
	}
	sock.hello(&messages.Hello{
		ConnId: connID, Node: s.node, User: claims.User, Device: claims.Device, Epoch: attempt,
		HeartbeatIntervalMs: uint32(dev.class.Heartbeat.Milliseconds()), HeartbeatClass: dev.class.Name,
		StaleMs: uint32(dev.class.Stale.Milliseconds()), HalfOpenBoundMs: uint32(dev.class.HalfOpen.Milliseconds()),
		IdleAfterMs: uint32(s.timing.IdleAfter.Milliseconds()), Platform: dev.platform,
	})
}

// device is what a handshake declares of its device.
type device struct {
	platform messages.Platform
	activity messages.Activity
	class    config.Class
}

// deviceParams reads ?platform=, ?activity= and ?class= (each optional:
// other, active, standard); one that names none of its values is 400 and
// nothing is written.
func (s *Server) deviceParams(w http.ResponseWriter, r *http.Request, q url.Values) (device, bool) {
	p, err := core.ParsePlatform(q.Get("platform"))
	var a messages.Activity
	if err == nil {
		a, err = core.ParseActivity(q.Get("activity"))
	}
	class, ok := s.timing.Class(q.Get("class"))
	if err == nil && !ok {
		err = fmt.Errorf("class %q: must be standard or battery", q.Get("class"))
	}
	if err != nil {
		s.refuse(w, r, http.StatusBadRequest, false, "%v", err)
		return device{}, false
	}
	return device{p, a, class}, true
}

// check runs the checks before the lease: the upgrade itself, the node
// taking devices, the admission rate, the token and the attempt.
func (s *Server) check(w http.ResponseWriter, r *http.Request, q url.Values) (Claims, uint64, bool) {
	h := r.Header
	if r.Method != http.MethodGet || !hasToken(h, "Connection", "upgrade") || !hasToken(h, "Upgrade", "websocket") || h.Get("Sec-WebSocket-Key") == "" {
		s.refuse(w, r, http.StatusBadRequest, false, "not a WebSocket upgrade")
		return Claims{}, 0, false
	}
	if h.Get("Sec-WebSocket-Version") != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		s.refuse(w, r, http.StatusUpgradeRequired, false, "Sec-WebSocket-Version must be 13")
		return Claims{}, 0, false
	}
	if s.draining.Load() {
		s.refuse(w, r, http.StatusServiceUnavailable, true, "node draining: reconnect elsewhere")
		return Claims{}, 0, false
	}
	if !s.admit.Allow() {
		s.refuse(w, r, http.StatusTooManyRequests, true, "too many handshakes: retry later")
		return Claims{}, 0, false
	}
	claims, err := s.tokens.Verify(bearer(r, q))
	if err != nil {
		s.refuse(w, r, http.StatusUnauthorized, false, "%v", err)
		return Claims{}, 0, false
	}
	attempt, err := strconv.ParseUint(q.Get("attempt"), 10, 64)
	if err != nil || attempt == 0 || attempt > MaxAttempt {
		s.refuse(w, r, http.StatusBadRequest, false, "attempt must be an integer in [1, %d]", uint64(MaxAttempt))
		return Claims{}, 0, false
	}
	return claims, attempt, true
}

// upgrade answers 101 and attaches the socket to its connection; false if
// the peer is gone already (the lease just taken is released).
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, sock *socket, conn *actors.Conn) bool {
	resp := http.Header{}
	if offered(r.Header, sock.codec.name) {
		resp.Set("Sec-WebSocket-Protocol", sock.codec.name)
	}
	ws, err := s.upgrader.Upgrade(w, r, resp)
	if err != nil {
		conn.Closed()
		return false
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
		return false
	}
	return true
}

// quietNbio sets nbio's log level, which is global to the process (nbio
// logs to stdout): errors only, once, whatever the number of servers.
var quietNbio sync.Once

// MaxAttempt is the largest ?attempt= accepted: 2^53 - 1, the largest
// integer every JSON client reads exactly (the attempt is the hello's
// epoch) and far below the store's int64.
const MaxAttempt = 1<<53 - 1

// nbioClosed reports whether the poller already closed the connection.
func nbioClosed(ws *websocket.Conn) (bool, error) {
	if nbc := nbioConn(ws); nbc != nil {
		return nbc.IsClosed()
	}
	return false, nil
}

// nbioConn finds the poller's connection under an upgraded one.
func nbioConn(ws *websocket.Conn) *nbio.Conn { return nbioOf(ws.UnderlayerConn()) }

// nbioOf is the poller's connection c is or wraps; nil for another (TLS).
func nbioOf(c net.Conn) *nbio.Conn {
	switch c := c.(type) {
	case *nbio.Conn:
		return c
	case *nbhttp.Conn:
		nc, _ := c.Conn.(*nbio.Conn)
		return nc
	}
	return nil
}

func bearer(r *http.Request, q url.Values) string {
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return q.Get("token")
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
