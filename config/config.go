// Package config holds a node's configuration: the timing presets of the
// seed article (docs/bounds.md), the addresses and keys, loading from YAML,
// environment and flags, and validation that names the parameter, its
// value and the rule it breaks.
//
// Precedence, lowest first: preset defaults, YAML file (--config), environment
// (PRESENCE_<FLAG>), command-line flags.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"
)

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("config: invalid")

// Timing is the parameter set of the three heartbeat layers. Every field is a
// duration or a fraction; Validate states the rules between them.
type Timing struct {
	// Heartbeat is the client heartbeat interval. Seed 30 s, fast 300 ms.
	// Clients jitter each interval down by up to HeartbeatJitter.
	Heartbeat time.Duration
	// HeartbeatJitter is the fraction by which a client shortens each
	// heartbeat interval at random. Default 0.1; rule: in [0, 0.5).
	HeartbeatJitter float64
	// Stale is how long a connection may go without a heartbeat (or Pong)
	// before its gateway closes it with reason ping_timeout. Seed 75 s.
	// Rule: > 2 x Heartbeat, so one lost heartbeat never closes a connection.
	Stale time.Duration
	// Check is the gateway's staleness check period. Seed 5 s. Rule: > 0 and
	// < Stale.
	Check time.Duration
	// Renew is the lease renewal interval of a live connection. Seed 60 s.
	// Each round is jittered by ±RenewJitter; the first is uniform in
	// [0, Renew].
	Renew time.Duration
	// RenewJitter is the ± fraction of each renewal round. Default 0.1; rule:
	// in [0, 0.5).
	RenewJitter float64
	// TTL is how long a lease lives after its last renewal. Seed 150 s.
	// Rule: > 2 x Renew, so one lost renewal never expires a lease.
	TTL time.Duration
	// Debounce delays the user-level offline: a device that comes back
	// within it publishes nothing. Seed 20 s. Rule: >= 0.
	Debounce time.Duration
	// Idle is how long a lease or view actor with nothing live waits before
	// it passivates (stops). Seed 10 min, fast 6 s. Rule: > 0.
	Idle time.Duration
	// IdleAfter is how long a device's declared active holds: it turns
	// idle unless the device declares active again (set_activity). Seed
	// 10 min, fast 6 s. Rule: > 0.
	IdleAfter time.Duration
	// StateSync is how long a device whose heartbeats drifted has to
	// answer the node's state_sync_request before it is closed with 4409
	// (authenticate again). Seed 60 s, fast 600 ms. Rule: > 0.
	StateSync time.Duration
	// BatchWindow is how often a connection's batched subscriptions are
	// sent: their changes merged, the latest state of each target that
	// changed in one presence_batch frame. Seed 5 s (what a friend list
	// may lag, seed 004 §4.3), fast 50 ms. Rule: in [10 ms, 1 min].
	BatchWindow time.Duration
	// BatteryFactor multiplies Heartbeat and Stale for a device that asks
	// for the battery class at its handshake (?class=battery). Default 4
	// (seed 002 §4.2: 120 s instead of 30 s); rule: in [2, 10].
	BatteryFactor int
	// FailureDetection is the gossip layer's worst-case time to declare a
	// crashed node dead, 0 when the node runs alone (no gossip). Derived,
	// not set by presets: cluster.Timings computes it from the memberlist
	// settings.
	FailureDetection time.Duration
	// Settle is how long a view re-created after a member failure waits
	// for the live devices to re-register before it reports the others
	// offline: the failure's propagation to every member, the re-register
	// jitter (renew / 2) and a check period. 0 alone; derived by
	// cluster.Timings.
	Settle time.Duration
}

// MaxBatteryFactor bounds Timing.BatteryFactor: a battery device still
// beats at least every 10 heartbeat intervals.
const MaxBatteryFactor = 10

// MinBatchWindow and MaxBatchWindow bound Timing.BatchWindow: shorter is a
// timer per connection for little merging, longer a friend list minutes
// behind.
const (
	MinBatchWindow = 10 * time.Millisecond
	MaxBatchWindow = time.Minute
)

// Config is one node's whole configuration.
type Config struct {
	NodeID     string // unique member name; default hostname plus a random suffix
	Listen     string // device WebSocket address
	Admin      string // admin HTTP + dashboard address
	AdminToken string // bearer token required by the admin API when set
	Gossip     string // memberlist bind address
	Join       []string
	// Advertise is the "host" or "host:port" the other members reach this
	// one's gossip at (NAT, containers, a 0.0.0.0 bind), and the host of
	// its actor remote; "": the gossip's own.
	Advertise  string
	RemotePort int           // proto.actor remote port; 0: any free one (not with Advertise or a 0.0.0.0 gossip)
	JoinRetry  time.Duration // keep trying the seeds this long, names resolved anew each second; 0: one try
	Preset     string        // "seed" or "fast"
	Secret     string        // device-token HMAC key
	ClusterKey string        // memberlist encryption key (16, 24 or 32 bytes) or empty
	Seed       int64         // seed of the node's random source; 0 picks one at start
	Demo       int           // simulated in-process devices to run (make run); 0: none
	LogLevel   slog.Level    // debug, info (default), warn or error
	// PolicyDSN names the store of policies, attempt floors and last seen:
	// "sqlite:PATH" (default sqlite:presence-data/presence.db, one file for
	// every node on a host), "postgres://..." (nodes on several hosts) or
	// "memory" (lost on exit; one node only).
	PolicyDSN string
	// SplitBrain is the split-brain resolver's strategy: "majority" (the
	// default: keep-majority, ties to the oldest member) or "lease" (a
	// lease row in the PolicyDSN store decides once members are
	// unreachable; docs/operations.md "Split brain").
	SplitBrain string
	// MemoryReturn is how often the node looks whether to give the heap's
	// free pages back to the system (package memreturn); 0: never.
	MemoryReturn time.Duration
	// GCQuiet is GOGC while the node allocates little for its live heap
	// (memreturn.Quiet); 0, the default: Go's all the time.
	GCQuiet int
	Timing  Timing
	Gateway Gateway
	Limits  Limits
	Degrade Degrade

	// SecretPrevious are older device-token keys still accepted while
	// tokens signed with them live out their expiry (rotation); tokens are
	// signed with Secret only.
	SecretPrevious []string
	// Insecure lets a node listen off loopback without a cluster key, an
	// admin token or its own device secret (see RequireSecrets).
	Insecure bool
	// AdminAllowedHosts are Host header values the admin API answers
	// besides its listen address and loopback names.
	AdminAllowedHosts []string
	// WebhookURLs are the endpoints every user's change is POSTed to
	// (docs/webhooks.md); WebhookSecret signs the deliveries (at least
	// MinWebhookSecret bytes; required with an endpoint).
	WebhookURLs   []string
	WebhookSecret string
	// WebhookRetryMax caps the back-off of a failing receiver (each wait
	// drawn from [0, back-off), which doubles from 100 ms). Default 1 min.
	WebhookRetryMax time.Duration
	// WebhookBacklog is the users' changes a node holds in memory per
	// endpoint, waiting for the store or the receiver: under it every
	// change is delivered, over it a user's changes are coalesced into her
	// latest (docs/webhooks.md, "The guarantee"). Default 10,000; rule:
	// >= 0 (0: the default).
	WebhookBacklog int
	files          struct{ secret, adminToken, clusterKey, webhookSecret string } // *-file parameters, read by Load
}

// Gateway is what an operator tunes of the device WebSocket endpoint;
// gateway.Options embeds it. Zero values take gateway.DefaultOptions().
type Gateway struct {
	Outbox       int           // frames queued per connection before 4008
	WriteTimeout time.Duration // cut a peer that takes nothing for this long
	AdmitRate    float64       // handshakes admitted per second before 429
	AdmitBurst   int           // handshakes admitted at once
	DrainSpread  time.Duration // SIGTERM closes devices over this long
	SendBuffer   int           // SO_SNDBUF of device sockets in bytes; 0: the kernel's
	// SubscribeRate and SubscribeBurst are each connection's token bucket
	// of subscribe frames (per second, at once); a subscribe beyond it is
	// answered with an error frame 429 and a retry-after in ms.
	SubscribeRate  float64
	SubscribeBurst int
	// ActivityRate and ActivityBurst are each connection's token bucket of
	// set_activity and state_sync frames; one beyond it is answered with
	// an error frame 429 and a retry-after in ms.
	ActivityRate  float64
	ActivityBurst int
	// QueryRate and QueryBurst are each connection's token bucket of
	// query frames; one beyond it is answered with an error frame 429 and
	// a retry-after in ms.
	QueryRate  float64
	QueryBurst int
}

// Limits bound what one client can make a node hold (docs/operations.md,
// "Limits"). Each is a count; rule: >= 0, 0 takes the default of
// DefaultLimits.
type Limits struct {
	// Subscriptions is the most targets one connection may be subscribed
	// to at once, over all its subscribe requests (unsubscribe frees
	// room); a subscribe that would go beyond is refused whole with an
	// error frame 413. Default 5000.
	Subscriptions int
	// Devices is the most devices of one user online at once; the
	// handshake of one more is refused with 403 (a device already online
	// reconnects). Default 100.
	Devices int
	// Batch is the most users one POST /api/presence/batch may name; more
	// is 413. Default 1000.
	Batch int
}

// DefaultLimits are the limits' defaults, the one place they are set.
func DefaultLimits() Limits { return Limits{Subscriptions: 5000, Devices: 100, Batch: 1000} }

// OrDefault is l with every zero field set to its default.
func (l Limits) OrDefault() Limits {
	d := DefaultLimits()
	for _, p := range []struct{ v, d *int }{{&l.Subscriptions, &d.Subscriptions}, {&l.Devices, &d.Devices}, {&l.Batch, &d.Batch}} {
		if *p.v == 0 {
			*p.v = *p.d
		}
	}
	return l
}

// DevSecret is the default device-token key. A node started with it logs a
// warning: it is public.
const DevSecret = "presence-dev-secret-do-not-use-in-production"

// Seed returns the timings of the seed article (E01): 30 s heartbeats.
func Seed() Timing {
	return Timing{
		Heartbeat:       30 * time.Second,
		HeartbeatJitter: 0.1,
		Stale:           75 * time.Second,
		Check:           5 * time.Second,
		Renew:           60 * time.Second,
		RenewJitter:     0.1,
		TTL:             150 * time.Second,
		Debounce:        20 * time.Second,
		Idle:            10 * time.Minute,
		IdleAfter:       10 * time.Minute,
		StateSync:       time.Minute,
		BatchWindow:     5 * time.Second,
		BatteryFactor:   4,
	}
}

// Fast returns the seed timings divided by 100, for tests and demos.
func Fast() Timing { return Seed().divided(100) }

// divided is t with every duration divided by n (fractions unchanged).
func (t Timing) divided(n time.Duration) Timing {
	for _, d := range []*time.Duration{&t.Heartbeat, &t.Stale, &t.Check, &t.Renew, &t.TTL, &t.Debounce, &t.Idle, &t.IdleAfter, &t.StateSync, &t.BatchWindow, &t.FailureDetection, &t.Settle} {
		*d /= n
	}
	return t
}

// Preset returns the named timing preset.
func Preset(name string) (Timing, error) {
	switch name {
	case "seed":
		return Seed(), nil
	case "fast":
		return Fast(), nil
	}
	return Timing{}, fmt.Errorf("%w: timing %q: must be seed or fast", ErrInvalid, name)
}

// Default returns a configuration with the defaults of docs/operations.md
// and the seed preset.
func Default() Config {
	return Config{
		Listen:       "127.0.0.1:7600",
		Admin:        "127.0.0.1:7700",
		Gossip:       "127.0.0.1:7946",
		Preset:       "seed",
		Secret:       DevSecret,
		PolicyDSN:    "sqlite:presence-data/presence.db",
		SplitBrain:   "majority",
		Timing:       Seed(),
		MemoryReturn: DefaultMemoryReturn,
		GCQuiet:      DefaultGCQuiet,
		Limits:       DefaultLimits(),
		Degrade:      DefaultDegrade(),
	}
}

// Degrade is when a node stops pushing its batched subscriptions and asks
// them to pull (docs/protocol.md, "Degraded mode"): the same for both
// presets, as a fan-out backlog does not scale with the heartbeat.
type Degrade struct {
	// At: degrade once the fan-out backlog (the oldest event not yet
	// written, or the longest written since the last reading) reaches it;
	// 0: never. Default 1 s.
	At time.Duration
	// Below and RestoreAfter: restore once the backlog has stayed under
	// Below for RestoreAfter. Defaults 250 ms, 10 s. Rule: Below < At.
	Below        time.Duration
	RestoreAfter time.Duration
	// Pull is the pace told to degraded connections (retry_after_ms of the
	// degraded frame): they query their degraded targets at most this
	// often. Default 10 s; rule: in [100 ms, 10 min].
	Pull time.Duration
}

// DefaultDegrade is Degrade's defaults.
func DefaultDegrade() Degrade {
	return Degrade{At: time.Second, Below: 250 * time.Millisecond, RestoreAfter: 10 * time.Second, Pull: 10 * time.Second}
}

// Validate checks Degrade's rules.
func (d Degrade) Validate() error {
	var errs []error
	if d.At < 0 || d.Below < 0 || d.RestoreAfter < 0 {
		errs = append(errs, fmt.Errorf("%w: degrade-at = %v, degrade-below = %v, restore-after = %v: must be >= 0", ErrInvalid, d.At, d.Below, d.RestoreAfter))
	}
	if d.At > 0 && d.Below >= d.At {
		errs = append(errs, fmt.Errorf("%w: degrade-below = %v: must be under degrade-at (%v)", ErrInvalid, d.Below, d.At))
	}
	if d.Pull < 100*time.Millisecond || d.Pull > 10*time.Minute {
		errs = append(errs, fmt.Errorf("%w: degraded-pull = %v: must be in [100ms, 10m0s]", ErrInvalid, d.Pull))
	}
	return errors.Join(errs...)
}

// DefaultMemoryReturn is --memory-return's default.
const DefaultMemoryReturn = 10 * time.Second

// DefaultGCQuiet is --gc-quiet's default.
const DefaultGCQuiet = 0

// Validate returns every broken rule, each naming the parameter, its value
// and the rule, joined; nil when the configuration is usable.
func (c Config) Validate() error {
	errs := []error{c.Timing.Validate(), c.Degrade.Validate()}
	if n := len(c.ClusterKey); n != 0 && n != 16 && n != 24 && n != 32 {
		errs = append(errs, fmt.Errorf("%w: cluster-key has %d bytes: must be 16, 24 or 32", ErrInvalid, n))
	}
	g := c.Gateway
	for _, f := range []struct {
		name string
		v    float64
	}{{"outbox", float64(g.Outbox)}, {"write-timeout", float64(g.WriteTimeout)}, {"admit-rate", g.AdmitRate},
		{"admit-burst", float64(g.AdmitBurst)}, {"drain-spread", float64(g.DrainSpread)}, {"send-buffer", float64(g.SendBuffer)},
		{"subscribe-rate", g.SubscribeRate}, {"subscribe-burst", float64(g.SubscribeBurst)},
		{"activity-rate", g.ActivityRate}, {"activity-burst", float64(g.ActivityBurst)},
		{"query-rate", g.QueryRate}, {"query-burst", float64(g.QueryBurst)},
		{"max-subscriptions", float64(c.Limits.Subscriptions)}, {"max-devices", float64(c.Limits.Devices)}, {"max-batch", float64(c.Limits.Batch)}} {
		if !(f.v >= 0) {
			errs = append(errs, fmt.Errorf("%w: %s = %v: must be >= 0 (0: the default)", ErrInvalid, f.name, f.v))
		}
	}
	if c.MemoryReturn < 0 {
		errs = append(errs, fmt.Errorf("%w: memory-return = %v: must be >= 0 (0: never)", ErrInvalid, c.MemoryReturn))
	}
	if c.GCQuiet < 0 || c.GCQuiet >= 100 {
		errs = append(errs, fmt.Errorf("%w: gc-quiet = %d: must be in [1, 99], or 0 for Go's GOGC all the time", ErrInvalid, c.GCQuiet))
	}
	if err := c.validateRemote(); err != nil {
		errs = append(errs, err)
	}
	if !ValidDSN(c.PolicyDSN) {
		errs = append(errs, fmt.Errorf("%w: policy-dsn %q: must be sqlite:PATH, postgres://... or memory", ErrInvalid, c.PolicyDSN))
	}
	switch {
	case c.SplitBrain != "majority" && c.SplitBrain != "lease":
		errs = append(errs, fmt.Errorf("%w: split-brain %q: must be majority or lease", ErrInvalid, c.SplitBrain))
	case c.SplitBrain == "lease" && c.PolicyDSN == "memory":
		errs = append(errs, fmt.Errorf("%w: split-brain lease needs a store every node shares: policy-dsn sqlite:PATH or postgres://..., not memory", ErrInvalid))
	}
	if c.Secret == "" {
		errs = append(errs, fmt.Errorf("%w: secret is empty: must be set", ErrInvalid))
	}
	errs = append(errs, c.RequireSecrets(), c.validateWebhooks())
	return errors.Join(errs...)
}

// MinWebhookSecret is the shortest --webhook-secret: 128 bits.
const MinWebhookSecret = 16

// validateWebhooks: every endpoint an absolute http or https URL, and a
// secret long enough to sign them.
func (c Config) validateWebhooks() error {
	var errs []error
	for _, raw := range c.WebhookURLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%w: webhook-url %q: must be an absolute http:// or https:// URL", ErrInvalid, raw))
		}
	}
	switch {
	case len(c.WebhookURLs) > 0 && c.WebhookSecret == "":
		errs = append(errs, fmt.Errorf("%w: webhook-secret is required with webhook-url: deliveries are signed with it", ErrInvalid))
	case c.WebhookSecret != "" && len(c.WebhookSecret) < MinWebhookSecret:
		errs = append(errs, fmt.Errorf("%w: webhook-secret has %d bytes: must be at least %d", ErrInvalid, len(c.WebhookSecret), MinWebhookSecret))
	}
	if c.WebhookRetryMax < 0 {
		errs = append(errs, fmt.Errorf("%w: webhook-retry-max = %v: must be >= 0 (0: the default)", ErrInvalid, c.WebhookRetryMax))
	}
	if c.WebhookBacklog < 0 {
		errs = append(errs, fmt.Errorf("%w: webhook-backlog = %d: must be >= 0 (0: the default)", ErrInvalid, c.WebhookBacklog))
	}
	return errors.Join(errs...)
}

// RequireSecrets is the secure-by-default rule: a node reachable from
// other hosts (its listen, admin or gossip address is not loopback) needs
// a cluster key, an admin token and a device secret of its own, unless
// Insecure says the operator means it. One error per missing item.
func (c Config) RequireSecrets() error {
	if c.Insecure {
		return nil
	}
	var exposed []string
	for _, a := range []struct{ name, addr string }{{"listen", c.Listen}, {"admin", c.Admin}, {"gossip", c.Gossip}} {
		if !Loopback(a.addr) {
			exposed = append(exposed, fmt.Sprintf("%s %s", a.name, a.addr))
		}
	}
	if len(exposed) == 0 {
		return nil
	}
	why := strings.Join(exposed, ", ") + " is not loopback"
	var errs []error
	for _, m := range []struct {
		missing bool
		what    string
	}{{c.ClusterKey == "", "cluster-key (or cluster-key-file) is required"}, {c.AdminToken == "", "admin-token (or admin-token-file) is required"},
		{c.Secret == DevSecret, "secret (or secret-file) must be set: the default is public"}} {
		if m.missing {
			errs = append(errs, fmt.Errorf("%w: %s: %s (--insecure to start anyway)", ErrInvalid, m.what, why))
		}
	}
	return errors.Join(errs...)
}

// Loopback reports whether a host:port listens on loopback only: a
// loopback IP or "localhost". An empty host or 0.0.0.0 listens everywhere,
// and any other name may resolve anywhere.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Validate checks the rules between the timings.
func (t Timing) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	for _, p := range []struct {
		name string
		v    time.Duration
	}{{"heartbeat", t.Heartbeat}, {"stale", t.Stale}, {"check", t.Check}, {"renew", t.Renew}, {"ttl", t.TTL}, {"idle", t.Idle},
		{"idle-after", t.IdleAfter}, {"state-sync-timeout", t.StateSync}} {
		if p.v <= 0 {
			bad("%s = %v: must be > 0", p.name, p.v)
		}
	}
	if t.Debounce < 0 {
		bad("debounce = %v: must be >= 0", t.Debounce)
	}
	if t.FailureDetection < 0 {
		bad("failure detection = %v: must be >= 0", t.FailureDetection)
	}
	// Written as halves so that huge values cannot overflow.
	if t.Heartbeat > (t.Stale-1)/2 {
		bad("stale = %v: must be > 2 x heartbeat (%v) so one lost heartbeat never closes a connection", t.Stale, 2*t.Heartbeat)
	}
	if t.BatchWindow < MinBatchWindow || t.BatchWindow > MaxBatchWindow {
		bad("batch-window = %v: must be in [%v, %v]", t.BatchWindow, MinBatchWindow, MaxBatchWindow)
	}
	if t.BatteryFactor < 2 || t.BatteryFactor > MaxBatteryFactor {
		bad("battery-factor = %d: must be in [2, %d]", t.BatteryFactor, MaxBatteryFactor)
	}
	if t.Check >= t.Stale {
		bad("check = %v: must be < stale (%v)", t.Check, t.Stale)
	}
	if t.Renew > (t.TTL-1)/2 {
		bad("ttl = %v: must be > 2 x renew (%v) so one lost renewal never expires a lease", t.TTL, 2*t.Renew)
	}
	for _, j := range []struct {
		name string
		v    float64
	}{{"heartbeat-jitter", t.HeartbeatJitter}, {"renew-jitter", t.RenewJitter}} {
		if !(j.v >= 0 && j.v < 0.5) { // also refuses NaN
			bad("%s = %v: must be in [0, 0.5)", j.name, j.v)
		}
	}
	return errors.Join(errs...)
}

// ValidDSN reports whether a policy DSN names a store kind presenced has.
func ValidDSN(dsn string) bool {
	return dsn == "memory" || strings.HasPrefix(dsn, "sqlite:") && len(dsn) > len("sqlite:") ||
		strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// validateRemote: the others learn the actor remote's address before it
// is bound, so a remote that is not where the gossip binds needs a fixed
// port.
func (c Config) validateRemote() error {
	if c.RemotePort < 0 || c.RemotePort > 65535 {
		return fmt.Errorf("%w: remote-port = %d: must be in [0, 65535]", ErrInvalid, c.RemotePort)
	}
	host, _, err := net.SplitHostPort(c.Gossip)
	if c.RemotePort == 0 && err == nil && (c.Advertise != "" || host == "" || host == "0.0.0.0" || host == "::") {
		return fmt.Errorf("%w: remote-port = 0 with advertise %q and gossip %q: must be set (the others are told the actor port before it is bound)", ErrInvalid, c.Advertise, c.Gossip)
	}
	if c.JoinRetry < 0 {
		return fmt.Errorf("%w: join-retry = %v: must be >= 0", ErrInvalid, c.JoinRetry)
	}
	return nil
}
