package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// ErrSuperseded ends a Session whose device connected again elsewhere
// (close 4001): this one must stay away.
var ErrSuperseded = errors.New("client: superseded by a newer connection of this device")

// ErrTokenExpired ends a Session whose token expired (close 4401) when it
// has no Refresh to get another.
var ErrTokenExpired = errors.New("client: the token expired")

// ErrReauthenticate ends a Session the node closed with 4409 (its
// heartbeats drifted and the state sync went unanswered) when it has no
// Refresh to get a new token.
var ErrReauthenticate = errors.New("client: the node asks to authenticate again (state sync failed)")

// Config configures a Session.
type Config struct {
	URLs  []string // node /ws URLs; 1001 and 503 move to the next
	Token string
	// Refresh, when set, gives a new token when the node closes the
	// connection because the token expired (4401) or asks the device to
	// authenticate again (4409); the session reconnects with it at once.
	// nil: the session ends with ErrTokenExpired or ErrReauthenticate.
	Refresh     func(context.Context) (string, error)
	Subprotocol string  // ProtoJSON (default) or ProtoBinary
	Jitter      float64 // heartbeats are shortened at random by up to this; default 0.1
	BackoffMin  time.Duration
	BackoffMax  time.Duration
	Rand        *rand.Rand // nil: seeded from the clock
	HTTPClient  *http.Client
	Log         *slog.Logger
	// Heartbeats false leaves heartbeating to the caller (tests of half-open
	// devices); the default (nil) heartbeats.
	Heartbeats *bool
	// Silence: a connection that hears nothing (its heartbeats ask for an
	// ack when it has heard nothing for a while: AckPolicy) for this long
	// is dropped and the next URL tried, as for 1001: its node died
	// without closing (power, network, a killed container). Default 2.5 x
	// hello's heartbeat interval (the server's own stale rule), at least
	// 2 s; 1.5 intervals or less has every heartbeat ask.
	Silence time.Duration
	// DialTimeout bounds one connection attempt (TCP, TLS, handshake): a
	// node whose host vanished may leave SYNs unanswered for minutes.
	// Default 10 s.
	DialTimeout time.Duration
	// Platform is the device's kind, sent at every handshake (0: other).
	Platform messages.Platform
	// Class is the heartbeat class: "" (standard) or "battery", a longer
	// interval (the hello's) for a device that saves its battery.
	Class string
	// Activity is what the device is doing at the start (SetActivity
	// changes it); 0 declares nothing, and the device counts as active
	// while connected, as a client of an earlier version does.
	Activity messages.Activity
}

// Status is what a user sets of its own: a show (auto: derived from the
// devices' activity), a status text, and until when (zero: until changed).
type Status struct {
	Show    messages.Show
	Text    string
	Expires time.Time
}

// silentCode is what serve returns for a connection that went silent; not
// a close code (those are positive).
const silentCode = -2

// noCloseCode is CloseCode's answer for a connection that ended without a
// close frame.
const noCloseCode = -1

// Event is a presence the session delivers: from a snapshot (Snapshot true)
// or a change newer than the last one kept for its user.
type Event struct {
	Presence *messages.Presence
	Snapshot bool
}

// Session keeps one device connected, heartbeating and subscribed.
type Session struct {
	cfg    Config
	events chan Event
	done   chan struct{}

	mu      sync.Mutex
	conn    *Conn
	targets map[string]messages.Tier // subscribed, with the tier of each
	state   map[string]*messages.Presence
	status  Status
	// activity is the device's declared activity (0: none declared);
	// told at every handshake, and renewed while active (activity.go).
	activity messages.Activity
	attempt  uint64
	err      error
	reqs     int
	asked    map[string][]string         // request id -> targets, until its snapshot
	queries  map[string]chan queryAnswer // request id -> the Query waiting
	// pulling are the targets the node degraded to pull (degraded frame),
	// and stopPull ends their pull loop; both until restored or the
	// connection ends. pulls are the request ids of the pull's queries
	// not yet answered: their answers are taken as changes by the reader,
	// in order with restored (degraded.go).
	pulling  map[string]bool
	stopPull context.CancelFunc
	pulls    map[string]bool
	pullers  sync.WaitGroup
	rtt      atomic.Int64  // the last heartbeat's round trip (RTT)
	conns    int           // successful connections
	ended    time.Time     // when the last connection ended
	gap      time.Duration // from then to the current one's hello
}

// Start runs a session until ctx ends or the device is superseded.
func Start(ctx context.Context, cfg Config) *Session {
	if cfg.Jitter == 0 {
		cfg.Jitter = 0.1
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 100 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 30 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Session{cfg: cfg, events: make(chan Event, 256), done: make(chan struct{}), targets: map[string]messages.Tier{}, state: map[string]*messages.Presence{},
		activity: cfg.Activity}
	go s.run(ctx)
	return s
}

// Events delivers snapshots and changes; it is closed when the session
// ends. The session's one reader waits while the channel (256 events) is
// full, so a consumer that stops reading backs the connection up until the
// server cuts it (4008): from then until the consumer reads again the
// device has no connection (its subscribers see it offline after the
// debounce). Once read again, the session takes what was buffered, sees the
// close, reconnects and resubscribes, so nothing is lost but intermediate
// versions.
func (s *Session) Events() <-chan Event { return s.events }

// Done is closed when the session ends; Err says why.
func (s *Session) Done() <-chan struct{} { return s.done }

func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Hello is the current connection's hello, nil while disconnected.
func (s *Session) Hello() *messages.Hello {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil
	}
	return s.conn.Hello
}

// Gap is how long the session went without a connection before the
// current one: from the moment it saw the previous one end (a close, a
// cut, silence) to the next one's hello, when its device is registered
// again (0 before a reconnect). Reconnect attempts refused meanwhile are
// in it.
func (s *Session) Gap() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gap
}

// Connections counts the connections made so far.
func (s *Session) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// State is the newest presence kept for target: its status, the derived
// show and, as the target's policy lets this user see them, the status
// text, the platforms online with their activity (Presence.Devices) and
// since when it is idle (Presence.IdleSinceMinute).
func (s *Session) State(target string) (*messages.Presence, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.state[target]
	return p, ok
}

// Subscribe adds targets in real time; they are subscribed again after
// every reconnect. A target subscribed already moves to real time.
func (s *Session) Subscribe(targets ...string) { s.SubscribeTier(messages.Tier_realtime, targets...) }

// SubscribeTier adds targets in tier: batched targets' changes come
// merged, at most once per the node's batch window (docs/protocol.md,
// "Tiers"), each still an Event. A target subscribed already moves to
// tier. They go in requests of at most 1000 targets that fit in a message
// (messages.MaxMessage bytes), each with its snapshot.
func (s *Session) SubscribeTier(tier messages.Tier, targets ...string) {
	s.mu.Lock()
	for _, t := range targets {
		s.targets[t] = tier
	}
	c := s.conn
	s.mu.Unlock()
	if c != nil {
		s.subscribe(context.Background(), c, tier, targets)
	}
}

// Unsubscribe removes targets.
func (s *Session) Unsubscribe(targets ...string) {
	s.mu.Lock()
	for _, t := range targets {
		delete(s.targets, t)
		delete(s.state, t)
	}
	c := s.conn
	s.mu.Unlock()
	if c != nil {
		_ = c.Unsubscribe(context.Background(), targets...)
	}
}

// SetStatus sets the user's show, now and after every reconnect.
func (s *Session) SetStatus(show messages.Show) { s.SetStatusText(Status{Show: show}) }

// SetStatusText sets the user's show and status text, now and after every
// reconnect until it expires. It refuses, naming the rule, what the node
// would refuse (core.ValidStatus): a text over 140 characters or not
// UTF-8, an expiry in the past.
func (s *Session) SetStatusText(st Status) error {
	var ms int64
	if !st.Expires.IsZero() {
		ms = st.Expires.UnixMilli()
	}
	if err := core.ValidStatus(st.Show, st.Text, ms, time.Now()); err != nil {
		return err
	}
	s.mu.Lock()
	s.status = st
	c := s.conn
	s.mu.Unlock()
	if c != nil {
		_ = c.SetStatusText(context.Background(), st.Show, st.Text, st.Expires)
	}
	return nil
}

// request names a subscribe of targets; callers hold mu.
func (s *Session) request(targets []string) string {
	s.reqs++
	id := fmt.Sprintf("r%d", s.reqs)
	if s.asked == nil {
		s.asked = map[string][]string{}
	}
	s.asked[id] = targets
	return id
}

// nextAttempt grows strictly and starts from the clock, so a restarted
// device still presents a higher attempt than any it used before.
func (s *Session) nextAttempt() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempt = max(s.attempt+1, uint64(time.Now().UnixMilli()))
	return s.attempt
}

func (s *Session) finish(err error) {
	s.mu.Lock()
	s.err, s.conn = err, nil
	s.mu.Unlock()
	close(s.events) // only run's goroutine sends, and it is here
	close(s.done)
}

// run is the reconnect loop. The back-off starts again only after a
// healthy connection (serve): one the node closes at once (a frame it
// refuses, 1002 to 1009) waits longer each time.
func (s *Session) run(ctx context.Context) {
	backoff, url, refused := s.cfg.BackoffMin, 0, 0
	for ctx.Err() == nil {
		dctx, dcancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
		c, err := Dial(dctx, s.cfg.URLs[url%len(s.cfg.URLs)], DialOptions{Token: s.cfg.Token, Attempt: s.nextAttempt(), Subprotocol: s.cfg.Subprotocol, HTTPClient: s.cfg.HTTPClient,
			Platform: s.cfg.Platform, Class: s.cfg.Class, Activity: s.currentActivity()})
		dcancel()
		if err != nil {
			delay, next, stop := s.dialFailed(err, backoff, &refused)
			if stop {
				s.finish(err)
				return
			}
			if next {
				url++
			}
			s.cfg.Log.Debug("client: connect failed", "err", err, "retry_in", delay)
			backoff = nextBackoff(backoff, s.cfg.BackoffMax)
			if !sleep(ctx, delay) {
				break
			}
			continue
		}
		refused = 0
		code, healthy := s.serve(ctx, c)
		s.cfg.Log.Debug("client: connection ended", "code", code, "healthy", healthy)
		if healthy {
			backoff = s.cfg.BackoffMin
		}
		next, err := s.after(ctx, code, backoff)
		if err != nil {
			s.finish(err)
			return
		}
		if next {
			url++
		}
		if !healthy {
			backoff = nextBackoff(backoff, s.cfg.BackoffMax)
		}
	}
	s.finish(ctx.Err())
}

// after does what follows a connection that ended with code: whether to
// try the next URL, after the wait it needs (drawn from backoff), or the
// error that ends the session.
func (s *Session) after(ctx context.Context, code int, backoff time.Duration) (next bool, err error) {
	switch code {
	case int(messages.CloseSuperseded):
		return false, ErrSuperseded
	case int(messages.CloseGoingAway), silentCode:
		return true, nil // reconnect elsewhere at once
	case noCloseCode:
		// cut without a close (reset, unreachable): its node may be gone,
		// and any node serves the device
		sleep(ctx, s.draw(backoff)) // a context ended ends the loop
		return true, nil
	case int(messages.CloseOverflow):
		return false, nil // reconnect and resubscribe at once
	case int(messages.CloseTokenExpired), int(messages.CloseStateSync):
		return false, s.refresh(ctx, code)
	default:
		sleep(ctx, s.draw(backoff))
		return false, nil
	}
}

// sleep waits d, or less if ctx ends: false then.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// dialFailed says what follows a failed dial: how long to wait, whether to
// try the next URL, or whether to stop (401: the token will not do). A 429
// or 503 (that node's admission rate, or it drains or fenced) moves to the
// next URL; its Retry-After is that node's, so it is waited out only once
// every URL refused since the last connection (refused counts them): a
// device closed by a draining node that meets another one draining or
// fenced reaches a third at once.
func (s *Session) dialFailed(err error, backoff time.Duration, refused *int) (delay time.Duration, next, stop bool) {
	var he *HandshakeError
	delay = s.draw(backoff) // full jitter
	if isRefusal(err) {
		*refused++
	}
	untried := *refused < len(s.cfg.URLs)
	switch {
	case errors.As(err, &he) && he.Status == http.StatusUnauthorized:
		return 0, false, true
	case errors.As(err, &he) && he.Status == http.StatusConflict:
		return 0, false, false // a higher attempt next time
	case isRefusal(err) && untried:
		return delay, true, false
	case isRefusal(err):
		return max(delay, he.RetryAfter), true, false
	}
	return delay, true, false
}

// isRefusal: a node answered the handshake 429 or 503 (with Retry-After).
func isRefusal(err error) bool {
	var he *HandshakeError
	return errors.As(err, &he) && (he.Status == http.StatusTooManyRequests || he.Status == http.StatusServiceUnavailable)
}

// refresh replaces the token (Config.Refresh) after a close with code:
// 4401 (it expired) or 4409 (authenticate again).
func (s *Session) refresh(ctx context.Context, code int) error {
	why := ErrTokenExpired
	if code == int(messages.CloseStateSync) {
		why = ErrReauthenticate
	}
	if s.cfg.Refresh == nil {
		return why
	}
	tok, err := s.cfg.Refresh(ctx)
	if err != nil {
		return fmt.Errorf("%w: refreshing the token: %w", why, err)
	}
	s.cfg.Token = tok // read by run's goroutine only, which is here
	return nil
}

// nextBackoff doubles the backoff up to max; each wait is drawn uniformly
// from [0, backoff] (full jitter), so a crowd of devices that lost the same
// node spreads out instead of returning in waves.
func nextBackoff(cur, max time.Duration) time.Duration { return min(2*cur, max) }

// serve runs one connection until it ends and returns its close code, and
// whether it was healthy: the node acked a heartbeat, or it lasted a
// heartbeat interval.
func (s *Session) serve(ctx context.Context, c *Conn) (code int, healthy bool) {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer s.pullers.Wait() // after cancel: no pull loop emits once the session may end
	defer cancel()
	s.mu.Lock()
	s.conn = c
	s.conns++
	if !s.ended.IsZero() {
		s.gap = time.Since(s.ended)
	}
	byTier := s.byTier()
	status := s.status
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.conn, s.ended = nil, time.Now()
		s.failQueriesLocked(ErrConnectionLost)
		s.stopPullingLocked()
		s.mu.Unlock()
		_ = c.CloseNow()
	}()
	s.subscribeAll(ctx, c, byTier)
	if status.Show != messages.Show_show_unspecified && (status.Expires.IsZero() || time.Now().Before(status.Expires)) {
		_ = c.SetStatusText(ctx, status.Show, status.Text, status.Expires)
	}
	if s.cfg.Heartbeats == nil || *s.cfg.Heartbeats {
		go s.heartbeat(ctx, c)
	}
	go s.renewActivity(ctx, c)
	silence, acked := s.silence(c), false
	lasted := func() bool { return acked || time.Since(start) >= heartbeatInterval(c) }
	for {
		rctx, rcancel := context.WithTimeout(ctx, silence)
		f, err := c.Next(rctx)
		rcancel()
		if err != nil && ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
			return silentCode, lasted()
		}
		if err != nil {
			return CloseCode(err), lasted()
		}
		if ack := f.GetHeartbeatAck(); ack != nil {
			acked = true
			s.sampleRTT(ack)
		}
		s.handle(ctx, c, f)
	}
}

// heartbeatInterval is the hello's, 30 s if it has none.
func heartbeatInterval(c *Conn) time.Duration {
	if ms := c.Hello.GetHeartbeatIntervalMs(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return 30 * time.Second
}

// handle is one frame from the node.
func (s *Session) handle(ctx context.Context, c *Conn, f *messages.Frame) {
	switch k := f.GetKind().(type) {
	case *messages.Frame_Snapshot:
		s.snapshot(ctx, k.Snapshot)
	case *messages.Frame_Presence:
		s.change(ctx, k.Presence)
	case *messages.Frame_Degraded:
		s.degraded(ctx, k.Degraded)
	case *messages.Frame_Restored:
		s.restored()
	case *messages.Frame_PresenceBatch:
		for _, p := range k.PresenceBatch.GetPresences() {
			s.change(ctx, p)
		}
	case *messages.Frame_Resync:
		s.mu.Lock()
		byTier := s.byTier()
		s.mu.Unlock()
		s.subscribeAll(ctx, c, byTier)
	case *messages.Frame_StateSyncRequest:
		_ = c.StateSync(ctx, k.StateSyncRequest.GetNonce(), s.declared())
	case *messages.Frame_Error:
		if s.answerQuery(k.Error.GetRequestId(), queryAnswer{err: serverError(k.Error)}) {
			return
		}
		s.cfg.Log.Warn("client: server error frame", "code", k.Error.GetCode(), "message", k.Error.GetMessage())
		s.retryActivity(ctx, c, k.Error)
	}
}

// silence is how long a connection may hear nothing (see Config.Silence).
func (s *Session) silence(c *Conn) time.Duration {
	if s.cfg.Silence > 0 {
		return s.cfg.Silence
	}
	return max(5*time.Duration(c.Hello.GetHeartbeatIntervalMs())*time.Millisecond/2, 2*time.Second)
}

// draw is uniform in [0, d). The heartbeat goroutine of a connection that
// is ending and the reconnect loop both draw, so under the lock.
func (s *Session) draw(d time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.cfg.Rand.Float64() * float64(d))
}

// heartbeat beats on c until ctx ends, each heartbeat asking for an ack
// only as AckPolicy says: the silence rule and an RTT sample need no more.
func (s *Session) heartbeat(ctx context.Context, c *Conn) {
	interval := heartbeatInterval(c)
	asks := AckPolicy{Interval: interval, Silence: s.silence(c)}
	for seq := uint64(1); ; seq++ {
		d := interval - time.Duration(s.cfg.Jitter*float64(s.draw(interval)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		if c.HeartbeatAsk(ctx, seq, asks.Ask(time.Since(c.Heard()))) != nil {
			return
		}
	}
}

// sampleRTT keeps the round trip of an acked heartbeat that carried the
// client's time.
func (s *Session) sampleRTT(ack *messages.HeartbeatAck) {
	if ts := ack.GetClientTsMs(); ts > 0 {
		s.rtt.Store(int64(max(time.Since(time.UnixMilli(ts)).Truncate(time.Millisecond), 0)))
	}
}

// RTT is the round trip of the last heartbeat the node acked, to the
// millisecond (the ack echoes the client's time in ms); 0 before the
// first. The session asks for an ack at least every AskEvery heartbeats.
func (s *Session) RTT() time.Duration { return time.Duration(s.rtt.Load()) }

// snapshot replaces the state of its targets: a target absent from it is
// not visible and is forgotten.
func (s *Session) snapshot(ctx context.Context, snap *messages.Snapshot) {
	if s.pulled(snap.GetRequestId()) {
		for _, p := range snap.GetPresences() {
			s.change(ctx, p)
		}
	}
	if s.answerQuery(snap.GetRequestId(), queryAnswer{presences: snap.GetPresences()}) {
		return
	}
	s.mu.Lock()
	for _, t := range s.asked[snap.GetRequestId()] {
		delete(s.state, t)
	}
	delete(s.asked, snap.GetRequestId())
	for _, p := range snap.GetPresences() {
		s.state[p.GetUser()] = p
	}
	s.mu.Unlock()
	for _, p := range snap.GetPresences() {
		s.emit(ctx, Event{Presence: p, Snapshot: true})
	}
}

// change keeps an event only if its version is newer than the last kept.
func (s *Session) change(ctx context.Context, p *messages.Presence) {
	s.mu.Lock()
	if old, ok := s.state[p.GetUser()]; ok && p.GetVersion() <= old.GetVersion() {
		s.mu.Unlock()
		return
	}
	s.state[p.GetUser()] = p
	s.mu.Unlock()
	s.emit(ctx, Event{Presence: p})
}

func (s *Session) emit(ctx context.Context, ev Event) {
	select {
	case s.events <- ev:
	case <-ctx.Done():
	}
}
