package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/dashboard"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/presence-im/presence/webhook"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is the admin API of one node.
type Server struct {
	Node     *actors.Node
	Members  cluster.Membership
	Timing   config.Timing
	Policies store.PolicyStore
	Gatherer prometheus.Gatherer
	Token    string // bearer token required when set
	Log      *slog.Logger
	// Ready, when set, tells whether the node takes devices; /readyz
	// answers 503 with its error otherwise.
	Ready func() error
	// Timeout bounds each lookup through the actors.
	Timeout time.Duration
	// Addr is the admin listen address; a request's Host must name it, an
	// IP address, localhost or one of AllowedHosts (see checkHost).
	Addr         string
	AllowedHosts []string
	// MaxEventStreams bounds the open GET /api/events streams; 0:
	// DefaultMaxEventStreams. One more answers 503.
	MaxEventStreams int
	// Recorder, when set, answers GET /api/history (its Run feeds it).
	Recorder *Recorder
	// MaxBatch bounds the users of one POST /api/presence/batch; more is
	// 413. 0: config.DefaultLimits().Batch.
	MaxBatch int
	// Webhooks, when set, answers GET /api/webhooks: each endpoint's
	// delivery as this node sees it.
	Webhooks interface {
		States(ctx context.Context) []webhook.State
	}
	// Size, when set, gives GET /api/bounds its size section for the
	// members alive now.
	Size    func(members int) SizeBounds
	streams atomic.Int64
}

// DefaultMaxEventStreams is the default cap on open event streams: each
// holds a subscription on every member.
const DefaultMaxEventStreams = 32

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if s.Ready != nil {
			if err := s.Ready(); err != nil {
				writeErr(w, http.StatusServiceUnavailable, err)
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /api/bounds", s.bounds)
	mux.HandleFunc("GET /api/cluster", s.cluster)
	mux.HandleFunc("GET /api/presence/{user}", s.presence)
	mux.HandleFunc("POST /api/presence/batch", s.batch)
	mux.HandleFunc("GET /api/route/{user}", s.route)
	mux.HandleFunc("GET /api/users/{user}/policy", s.getPolicy)
	mux.HandleFunc("PUT /api/users/{user}/policy", s.putPolicy)
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("GET /api/history", s.history)
	mux.HandleFunc("GET /api/users/{user}/graph", s.graph)
	mux.HandleFunc("GET /api/actors", s.actorsPage)
	mux.HandleFunc("GET /api/webhooks", s.webhooks)
	// Go's profiler, behind the token like the rest: a profile shows where
	// the node spends its CPU and heap under real load (docs/operations.md).
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	dash := dashboard.Handler()
	mux.Handle("GET /{$}", dash)
	mux.Handle("GET /static/", dash)
	return s.checkHost(s.authorize(mux))
}

// checkHost refuses (421) a request whose Host header is a name the
// operator did not list: a page on another site that rebinds its DNS name
// to this address would send its own name. An IP address cannot be
// rebound, so IP hosts pass, as do localhost and the listen address.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		ok := net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") || r.Host == s.Addr ||
			slices.ContainsFunc(s.AllowedHosts, func(a string) bool { return strings.EqualFold(a, host) || strings.EqualFold(a, r.Host) })
		if !ok {
			writeErr(w, http.StatusMisdirectedRequest, fmt.Errorf("admin: Host %q is not this node's: add it to --admin-allowed-hosts", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorize requires the bearer token, when one is set, on all but the
// public paths. A refused request closes its connection, so that a
// client without the token pays a new connection for each try.
func (s *Server) authorize(mux http.Handler) http.Handler {
	if s.Token == "" {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The page and its assets hold nothing secret; the page sends the
		// token it is given (#token=) with each call. EventSource cannot
		// set a header, so /api/events takes ?token= too.
		// health and readiness are for probes (a kubelet sends no token)
		public := r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/static/")
		got := r.Header.Get("Authorization")
		if q := r.URL.Query().Get("token"); q != "" && got == "" && r.URL.Path == "/api/events" {
			got = "Bearer " + q
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+s.Token)) != 1 && !public {
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.Header().Set("Connection", "close")
			writeErr(w, http.StatusUnauthorized, errors.New("admin: bearer token required"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// Bounds is GET /api/bounds: each bound in milliseconds, how it is
// derived, and the running timings.
type Bounds struct {
	GracefulCloseMs int64             `json:"graceful_close_ms"`
	HalfOpenMs      int64             `json:"half_open_ms"`
	GatewayCrashMs  int64             `json:"gateway_crash_ms"`
	MinLeaseLifeMs  int64             `json:"min_lease_life_ms"`
	OwnerCrashMs    int64             `json:"owner_crash_ms"`
	Formulas        map[string]string `json:"formulas"`
	Timing          Timing            `json:"timing"`
	// Classes are the heartbeat classes (?class=): each one's interval,
	// stale and half-open bound; the other bounds are the same for both.
	Classes map[string]Class `json:"classes"`
	// Size, in a cluster, are the bounds that grow with its size, for the
	// members alive now (Server.Size).
	Size *SizeBounds `json:"size,omitempty"`
}

// SizeBounds are the bounds that grow with the cluster, for members
// members (cluster/size.go, docs/bounds.md "The cluster's size"): the
// worst minority's fence decision after a cut and its last device closed,
// and a join's convergence.
type SizeBounds struct {
	Members           int   `json:"members"`
	FenceDecisionMs   int64 `json:"fence_decision_ms"`
	FenceMs           int64 `json:"fence_ms"`
	JoinConvergenceMs int64 `json:"join_convergence_ms"`
}

// Class is one heartbeat class in milliseconds (config.Class).
type Class struct {
	HeartbeatMs int64 `json:"heartbeat_ms"`
	StaleMs     int64 `json:"stale_ms"`
	HalfOpenMs  int64 `json:"half_open_ms"`
}

// Timing is config.Timing in milliseconds (fractions as they are).
type Timing struct {
	HeartbeatMs        int64   `json:"heartbeat_ms"`
	HeartbeatJitter    float64 `json:"heartbeat_jitter"`
	StaleMs            int64   `json:"stale_ms"`
	CheckMs            int64   `json:"check_ms"`
	RenewMs            int64   `json:"renew_ms"`
	RenewJitter        float64 `json:"renew_jitter"`
	TTLMs              int64   `json:"ttl_ms"`
	DebounceMs         int64   `json:"debounce_ms"`
	FailureDetectionMs int64   `json:"failure_detection_ms"`
	SettleMs           int64   `json:"settle_ms"`
	IdleAfterMs        int64   `json:"idle_after_ms"`
	StateSyncMs        int64   `json:"state_sync_ms"`
	BatchWindowMs      int64   `json:"batch_window_ms"`
	BatteryFactor      int     `json:"battery_factor"`
}

// formulas says how each bound is derived (docs/bounds.md).
var formulas = map[string]string{
	"graceful_close": "debounce",
	"half_open":      "stale + check + debounce",
	"gateway_crash":  "min(ttl, failure_detection) + debounce",
	"min_lease_life": "ttl after the last renewal",
	"owner_crash":    "failure_detection + settle + debounce (a member dies with the lease or view of its own devices; 0 alone)",
	"battery":        "heartbeat and stale x battery_factor; half_open = stale x battery_factor + check + debounce",
}

func (s *Server) bounds(w http.ResponseWriter, _ *http.Request) {
	b, t := s.Timing.Bounds(), s.Timing
	writeJSON(w, http.StatusOK, Bounds{
		GracefulCloseMs: ms(b.GracefulClose), HalfOpenMs: ms(b.HalfOpen), GatewayCrashMs: ms(b.GatewayCrash),
		MinLeaseLifeMs: ms(b.MinLeaseLife), OwnerCrashMs: ms(b.OwnerCrash), Formulas: formulas,
		Timing: Timing{
			HeartbeatMs: ms(t.Heartbeat), HeartbeatJitter: t.HeartbeatJitter, StaleMs: ms(t.Stale),
			CheckMs: ms(t.Check), RenewMs: ms(t.Renew), RenewJitter: t.RenewJitter, TTLMs: ms(t.TTL),
			DebounceMs: ms(t.Debounce), FailureDetectionMs: ms(t.FailureDetection), SettleMs: ms(t.Settle),
			IdleAfterMs: ms(t.IdleAfter), StateSyncMs: ms(t.StateSync), BatchWindowMs: ms(t.BatchWindow), BatteryFactor: t.BatteryFactor,
		},
		Classes: classes(t),
		Size:    s.size(),
	})
}

// size is the size section for the members alive now, or nil.
func (s *Server) size() *SizeBounds {
	if s.Size == nil {
		return nil
	}
	alive := 0
	for _, m := range s.Members.Members() {
		if m.State == cluster.Alive {
			alive++
		}
	}
	b := s.Size(alive)
	return &b
}

func classes(t config.Timing) map[string]Class {
	out := map[string]Class{}
	for _, name := range []string{config.ClassStandard, config.ClassBattery} {
		c, _ := t.Class(name)
		out[name] = Class{HeartbeatMs: ms(c.Heartbeat), StaleMs: ms(c.Stale), HalfOpenMs: ms(c.HalfOpen)}
	}
	return out
}

// Cluster is GET /api/cluster: the members as this node's gossip sees them
// and every alive member's live actors by kind; a member that did not
// answer in time is listed under Unanswered.
type Cluster struct {
	Self    string                    `json:"self"`
	Members []cluster.Member          `json:"members"`
	Actors  map[string]map[string]int `json:"actors"`
	// Renewals is each member's lease renewals accepted since it started
	// (a counter: the page draws its rate).
	Renewals map[string]uint64 `json:"renewals"`
	// Degraded is, for each member whose batched subscriptions are
	// degraded to pull, since when (RFC 3339; docs/protocol.md, "Degraded
	// mode").
	Degraded map[string]string `json:"degraded,omitempty"`
	// StoreFailing is, for each member whose store calls fail, the
	// operations failing (presence_store_failing; docs/operations.md,
	// "The store down, paused or slow").
	StoreFailing map[string][]string `json:"store_failing,omitempty"`
	Unanswered   []string            `json:"unanswered,omitempty"`
}

// cluster answers Cluster, asking every member through the actor system.
func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout())
	defer cancel()
	st := s.Node.ClusterCounts(ctx)
	var degraded map[string]string
	for id, ms := range st.Degraded {
		if degraded == nil {
			degraded = map[string]string{}
		}
		degraded[id] = time.UnixMilli(ms).UTC().Format(time.RFC3339)
	}
	writeJSON(w, http.StatusOK, Cluster{Self: s.Members.Self().ID, Members: s.Members.Members(), Actors: st.Counts, Renewals: st.Renewals,
		Degraded: degraded, StoreFailing: st.StoreFailing, Unanswered: st.Missing})
}

// webhooks is GET /api/webhooks: every endpoint's state ([] without any).
func (s *Server) webhooks(w http.ResponseWriter, r *http.Request) {
	states := []webhook.State{}
	if s.Webhooks != nil {
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout())
		defer cancel()
		states = append(states, s.Webhooks.States(ctx)...)
	}
	writeJSON(w, http.StatusOK, states)
}

// Device is one online device in presence and route answers, in the
// order of deliverability: active, idle, background, then the most
// recently active; a dirty one (its heartbeats drifted, a state sync
// asked) last.
type Device struct {
	Device   string `json:"device"`
	Platform string `json:"platform"`
	Activity string `json:"activity"`
	// ActivitySince is since when the activity holds (RFC 3339); LastActive
	// when the device last declared active (omitted: never).
	ActivitySince string `json:"activity_since"`
	LastActive    string `json:"last_active,omitempty"`
	Dirty         bool   `json:"dirty,omitempty"`
	Node          string `json:"node"`
	ConnID        string `json:"conn_id"`
	Epoch         uint64 `json:"epoch"`
	Since         string `json:"since"`
}

// UserPresence is the raw (untrimmed) state of a user, for operators:
// the derived show, and what the user set (user_show, until show_expires).
type UserPresence struct {
	User        string   `json:"user"`
	Status      string   `json:"status"`
	Show        string   `json:"show,omitempty"`
	StatusText  string   `json:"status_text,omitempty"`
	IdleSince   string   `json:"idle_since,omitempty"`
	UserShow    string   `json:"user_show,omitempty"`
	ShowExpires string   `json:"show_expires,omitempty"`
	LastSeen    string   `json:"last_seen,omitempty"`
	Foreground  bool     `json:"foreground"`
	Attended    bool     `json:"attended"`
	Devices     []Device `json:"devices"`
}

func (s *Server) lookup(ctx context.Context, user string) (UserPresence, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	st, err := s.Node.Query(ctx, user)
	s.Node.Metrics().CountLookup(st, err)
	if err != nil {
		return UserPresence{}, err
	}
	return toPresence(st), nil
}

func toPresence(st *messages.ViewState) UserPresence {
	p := UserPresence{User: st.GetUser(), Status: "offline", Devices: []Device{}, Foreground: st.GetForeground(), Attended: st.GetAttended()}
	if st.GetOnline() {
		p.Status, p.Show, p.StatusText = "online", st.GetShow().String(), st.GetStatusText()
		p.IdleSince = minuteOf(st.GetIdleSinceMs())
	}
	if sh := st.GetUserShow(); sh != messages.Show_show_unspecified {
		p.UserShow, p.ShowExpires = sh.String(), instant(st.GetShowExpiresMs())
	}
	p.LastSeen = minuteOf(st.GetLastSeenMs())
	for _, d := range st.GetDevices() {
		p.Devices = append(p.Devices, Device{
			Device: d.GetDevice(), Platform: d.GetPlatform().String(), Activity: d.GetActivity().String(),
			ActivitySince: instant(d.GetActivityAtMs()), LastActive: instant(d.GetLastActiveMs()), Dirty: d.GetDirty(),
			Node: d.GetNode(), ConnID: d.GetConnId(), Epoch: d.GetEpoch(), Since: instant(d.GetSinceMs()),
		})
	}
	return p
}

// instant is a Unix ms time in RFC 3339 with its fraction ("" for 0).
func instant(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// minuteOf is a Unix ms time to the minute, as viewers are told it ("" for 0).
func minuteOf(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Truncate(time.Minute).Format(time.RFC3339)
}

func (s *Server) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return 2 * time.Second
}

// status maps a lookup error: a bad id is the caller's fault (400); anything
// else means the owner could not be reached, which is unknown (503), never
// offline.
func status(err error) int {
	if errors.Is(err, core.ErrBadID) {
		return http.StatusBadRequest
	}
	return http.StatusServiceUnavailable
}

func (s *Server) presence(w http.ResponseWriter, r *http.Request) {
	p, err := s.lookup(r.Context(), r.PathValue("user"))
	if err != nil {
		writeErr(w, status(err), err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// Route is GET /api/route/{user}: where to deliver (no device: offline),
// devices in the order to try them. Foreground is false when no device is
// active or idle (all in the background, or none): send a vendor push as
// well; Attended is false when none is active (the user is away from
// every screen).
type Route struct {
	User       string   `json:"user"`
	Devices    []Device `json:"devices"`
	Foreground bool     `json:"foreground"`
	Attended   bool     `json:"attended"`
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	p, err := s.lookup(r.Context(), r.PathValue("user"))
	if err != nil {
		writeErr(w, status(err), err)
		return
	}
	writeJSON(w, http.StatusOK, Route{User: p.User, Devices: p.Devices, Foreground: p.Foreground, Attended: p.Attended})
}

func (s *Server) batch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Users []string `json:"users"`
	}
	if err := decodeBody(w, r, 1<<20, &req); err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("admin: body: %w", err))
		return
	}
	limit := config.Limits{Batch: s.MaxBatch}.OrDefault().Batch
	switch {
	case len(req.Users) == 0:
		writeErr(w, http.StatusBadRequest, errors.New("admin: 0 users: must be 1 or more"))
		return
	case len(req.Users) > limit:
		s.Node.Metrics().Refused.WithLabelValues(actors.LimitBatch).Inc()
		writeErr(w, http.StatusRequestEntityTooLarge, fmt.Errorf("admin: %d users: more than the limit of %d per batch (max-batch)", len(req.Users), limit))
		return
	}
	out := make([]any, len(req.Users))
	for i, u := range req.Users {
		p, err := s.lookup(r.Context(), u)
		if err != nil {
			out[i] = Unknown{User: u, Status: "unknown", Error: err.Error()}
			continue
		}
		out[i] = p
	}
	writeJSON(w, http.StatusOK, Batch{Users: out})
}

// Batch is POST /api/presence/batch's answer: a UserPresence per user, or
// an Unknown for one whose owner did not answer.
type Batch struct {
	Users []any `json:"users"`
}

// Unknown is a batch entry whose state is unknown (never offline).
type Unknown struct {
	User   string `json:"user"`
	Status string `json:"status"` // "unknown"
	Error  string `json:"error"`
}

func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	if err := core.ValidID("user", user); err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	doc, ok, err := s.Policies.Get(r.Context(), user)
	switch {
	case err != nil:
		writeErr(w, http.StatusServiceUnavailable, err)
	case !ok:
		writeErr(w, http.StatusNotFound, fmt.Errorf("admin: user %q has no policy (visible to nobody)", user))
	default:
		writeJSON(w, http.StatusOK, withLists(doc))
	}
}

func (s *Server) putPolicy(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	if err := core.ValidID("user", user); err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	var doc store.PolicyDoc
	if err := decodeBody(w, r, 4<<20, &doc); err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("admin: policy body: %w", err))
		return
	}
	if err := s.Policies.Put(r.Context(), user, doc); err != nil {
		code := http.StatusServiceUnavailable
		if errors.Is(err, store.ErrBadPolicy) {
			code = http.StatusBadRequest
		}
		writeErr(w, code, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := s.Node.ApplyPolicy(ctx, user); err != nil {
		writeErr(w, http.StatusServiceUnavailable, fmt.Errorf("admin: the policy is stored; the user's view did not confirm it applied it (it will at its next read): %w", err))
		return
	}
	writeJSON(w, http.StatusOK, withLists(doc))
}

// errTrailing: a body is one JSON value; what follows it would be read by
// nobody, and a proxy or a log could read it differently.
var errTrailing = errors.New("more than one JSON value")

// decodeBody reads exactly one JSON value of at most limit bytes, with no
// field v does not have.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errTrailing
	}
	return nil
}

// withLists renders omitted lists as [] rather than null.
func withLists(d store.PolicyDoc) store.PolicyDoc {
	for _, l := range []*[]string{&d.Contacts, &d.Blocked, &d.HiddenFrom} {
		if *l == nil {
			*l = []string{}
		}
	}
	return d
}

// Event is one line of GET /api/events (the data of a server-sent event
// named after its kind).
type Event struct {
	Kind      string `json:"kind"` // device_up, device_down, published, member, fence, drain
	Node      string `json:"node"` // the node that saw it
	AtMs      int64  `json:"at_ms"`
	User      string `json:"user,omitempty"`
	Device    string `json:"device,omitempty"`
	Gateway   string `json:"gateway,omitempty"`    // device_up: the device's node
	Reason    string `json:"reason,omitempty"`     // device_down: end reason; member: its state; published offline: leave mode
	Status    string `json:"status,omitempty"`     // published: online or offline
	LatencyMs int64  `json:"latency_ms,omitempty"` // published offline: from the departure
	Member    string `json:"member,omitempty"`
}

// events streams what every node sees as server-sent events, with a
// comment line every 15 s (and how many events a slow reader lost).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	limit := int64(s.MaxEventStreams)
	if limit <= 0 {
		limit = DefaultMaxEventStreams
	}
	if n := s.streams.Add(1); n > limit {
		s.streams.Add(-1)
		w.Header().Set("Retry-After", "5")
		writeErr(w, http.StatusServiceUnavailable, fmt.Errorf("admin: %d event streams open, the most this node serves: retry later", limit))
		return
	}
	defer s.streams.Add(-1)
	// Subscribed before the headers go out: a client that reads what
	// happened before (GET /api/history) once the stream is open misses
	// nothing in between (docs/operations.md).
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel() // ends the subscription with the handler
	ch, dropped := s.Node.Events(ctx)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return // not a streaming connection
	}
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		var err error
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		select {
		case <-ctx.Done():
			return
		case <-keep.C:
			_, err = fmt.Fprintf(w, ": dropped %d\n\n", dropped.Load())
		case ev := <-ch:
			b, _ := json.Marshal(toEvent(ev))
			_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.GetKind(), b)
		}
		if err != nil || rc.Flush() != nil {
			return
		}
	}
}
