package config

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// field is one settable parameter: its flag name (also the YAML key and, as
// PRESENCE_<NAME> with dashes as underscores, the environment variable).
type field struct {
	name  string
	usage string
	set   func(c *Config, v string) error
}

// switches are the boolean fields: --name alone means true.
var switches = map[string]bool{"insecure": true}

// repeatable are the list fields a flag may give more than once: each
// occurrence adds to the list (as a comma in one value does).
var repeatable = map[string]bool{"webhook-url": true}

func str(p func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *p(c) = v; return nil }
}

func dur(p func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		*p(c) = d
		return nil
	}
}

func intField(p func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		*p(c) = n
		return err
	}
}

func frac(p func(*Config) *float64) func(*Config, string) error {
	return func(c *Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return err
		}
		*p(c) = f
		return nil
	}
}

// fields lists every parameter except --config and --timing, which are
// resolved first because they choose the other defaults.
var fields = []field{
	{"node-id", "unique member name (default: hostname plus a random suffix)", str(func(c *Config) *string { return &c.NodeID })},
	{"listen", "device WebSocket address", str(func(c *Config) *string { return &c.Listen })},
	{"admin", "admin HTTP and dashboard address", str(func(c *Config) *string { return &c.Admin })},
	{"admin-token", "bearer token required by the admin API (empty: none)", str(func(c *Config) *string { return &c.AdminToken })},
	{"gossip", "memberlist bind address", str(func(c *Config) *string { return &c.Gossip })},
	{"join", "comma-separated gossip seeds (empty: start a new cluster)", func(c *Config, v string) error {
		c.Join = splitList(v)
		return nil
	}},
	{"advertise", "host[:port] the other members reach this one's gossip and actor remote at (default: the gossip address; a private IP when it binds 0.0.0.0)", str(func(c *Config) *string { return &c.Advertise })},
	{"remote-port", "port of the actor remote, bound on the gossip host (0: any free one; set it with --advertise or a 0.0.0.0 gossip)", intField(func(c *Config) *int { return &c.RemotePort })},
	{"join-retry", "keep trying the seeds this long, resolving their names anew each second (0: one try)", dur(func(c *Config) *time.Duration { return &c.JoinRetry })},
	{"secret", "device-token HMAC key (default: a public dev key)", str(func(c *Config) *string { return &c.Secret })},
	{"cluster-key", "memberlist encryption key, 16, 24 or 32 bytes (empty: none); also the root of the actor transport's mutual TLS", str(func(c *Config) *string { return &c.ClusterKey })},
	{"secret-file", "file whose first line is the device-token key; further lines are older keys still accepted", str(func(c *Config) *string { return &c.files.secret })},
	{"secret-previous", "comma-separated older device-token keys still accepted (rotation)", func(c *Config, v string) error {
		c.SecretPrevious = splitList(v)
		return nil
	}},
	{"admin-token-file", "file holding the admin token", str(func(c *Config) *string { return &c.files.adminToken })},
	{"cluster-key-file", "file holding the cluster key", str(func(c *Config) *string { return &c.files.clusterKey })},
	{"insecure", "start off loopback without cluster key, admin token or device secret", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		c.Insecure = b
		return err
	}},
	{"admin-allowed-hosts", "comma-separated Host header values the admin API answers besides its own address", func(c *Config, v string) error {
		c.AdminAllowedHosts = splitList(v)
		return nil
	}},
	{"webhook-url", "endpoint every user's change is POSTed to (repeatable, or comma-separated; docs/webhooks.md)", func(c *Config, v string) error {
		c.WebhookURLs = splitList(v)
		return nil
	}},
	{"webhook-secret", "HMAC key the webhook deliveries are signed with (X-Presence-Signature), at least 16 bytes; required with webhook-url", str(func(c *Config) *string { return &c.WebhookSecret })},
	{"webhook-secret-file", "file holding the webhook secret", str(func(c *Config) *string { return &c.files.webhookSecret })},
	{"webhook-retry-max", "the longest back-off of a failing webhook receiver (default 1m)", dur(func(c *Config) *time.Duration { return &c.WebhookRetryMax })},
	{"webhook-backlog", "users' changes held in memory per webhook endpoint: under it every change is delivered, over it a user's are coalesced into her latest (default 10000)", intField(func(c *Config) *int { return &c.WebhookBacklog })},
	{"policy-dsn", "store of policies, attempt floors and last seen: sqlite:PATH, postgres://... or memory", str(func(c *Config) *string { return &c.PolicyDSN })},
	{"split-brain", "split-brain strategy: majority (keep-majority, ties to the oldest member) or lease (a lease in the policy-dsn store decides once members are unreachable)", str(func(c *Config) *string { return &c.SplitBrain })},
	{"seed", "seed of the node's random source (0: random)", func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		c.Seed = n
		return err
	}},
	{"demo", "simulated in-process demo devices to run (0: none)", func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err == nil && (n < 0 || n > 10000) {
			err = fmt.Errorf("must be in [0, 10000]")
		}
		c.Demo = n
		return err
	}},
	{"log-level", "debug, info, warn or error (default info)", func(c *Config, v string) error {
		return c.LogLevel.UnmarshalText([]byte(v))
	}},
	{"outbox", "frames queued per device connection before it is closed with 4008 (default 64)", intField(func(c *Config) *int { return &c.Gateway.Outbox })},
	{"write-timeout", "cut a device that takes no data for this long (default 10s)", dur(func(c *Config) *time.Duration { return &c.Gateway.WriteTimeout })},
	{"admit-rate", "handshakes admitted per second before 429 (default 500)", frac(func(c *Config) *float64 { return &c.Gateway.AdmitRate })},
	{"admit-burst", "handshake burst admitted (default 1000)", intField(func(c *Config) *int { return &c.Gateway.AdmitBurst })},
	{"drain-spread", "on SIGTERM, close devices over this long (default 2s)", dur(func(c *Config) *time.Duration { return &c.Gateway.DrainSpread })},
	{"send-buffer", "SO_SNDBUF of device sockets in bytes (0: the kernel's)", intField(func(c *Config) *int { return &c.Gateway.SendBuffer })},
	{"subscribe-rate", "subscribe frames a connection may send per second before an error frame 429 (default 5)", frac(func(c *Config) *float64 { return &c.Gateway.SubscribeRate })},
	{"subscribe-burst", "subscribe frames a connection may send at once (default 10)", intField(func(c *Config) *int { return &c.Gateway.SubscribeBurst })},
	{"activity-rate", "set_activity and state_sync frames a connection may send per second before an error frame 429 (default 1)", frac(func(c *Config) *float64 { return &c.Gateway.ActivityRate })},
	{"activity-burst", "set_activity and state_sync frames a connection may send at once (default 5)", intField(func(c *Config) *int { return &c.Gateway.ActivityBurst })},
	{"query-rate", "query frames a connection may send per second before an error frame 429 (default 1)", frac(func(c *Config) *float64 { return &c.Gateway.QueryRate })},
	{"query-burst", "query frames a connection may send at once (default 5)", intField(func(c *Config) *int { return &c.Gateway.QueryBurst })},
	{"max-subscriptions", "targets one connection may be subscribed to at once, over all its requests; beyond: an error frame 413 (default 5000)", intField(func(c *Config) *int { return &c.Limits.Subscriptions })},
	{"max-devices", "devices of one user online at once; the handshake of one more is 403 (default 100)", intField(func(c *Config) *int { return &c.Limits.Devices })},
	{"degrade-at", "degrade batched subscriptions to pull once the fan-out backlog reaches this (default 1s; 0: never)", dur(func(c *Config) *time.Duration { return &c.Degrade.At })},
	{"degrade-below", "restore push once the backlog stays under this ... (default 250ms)", dur(func(c *Config) *time.Duration { return &c.Degrade.Below })},
	{"restore-after", "... for this long (default 10s)", dur(func(c *Config) *time.Duration { return &c.Degrade.RestoreAfter })},
	{"degraded-pull", "how often degraded connections may query their targets (retry_after_ms; default 10s)", dur(func(c *Config) *time.Duration { return &c.Degrade.Pull })},
	{"max-batch", "users one POST /api/presence/batch may name; more is 413 (default 1000)", intField(func(c *Config) *int { return &c.Limits.Batch })},
	{"memory-return", "how often to look whether the heap keeps many free pages while the node is quiet, and give them back to the system (0: never; default 10s)", dur(func(c *Config) *time.Duration { return &c.MemoryReturn })},
	{"gc-quiet", "GOGC while the node allocates little for its live heap, e.g. 25: about 1 KiB less RSS per device at rest, paid in CPU and lookup latency while quiet (default 0; 0: Go's GOGC all the time; off where GOGC is set)", intField(func(c *Config) *int { return &c.GCQuiet })},
	{"heartbeat", "client heartbeat interval", dur(func(c *Config) *time.Duration { return &c.Timing.Heartbeat })},
	{"heartbeat-jitter", "fraction clients shorten each heartbeat by at random", frac(func(c *Config) *float64 { return &c.Timing.HeartbeatJitter })},
	{"stale", "a connection with no heartbeat for this long is closed", dur(func(c *Config) *time.Duration { return &c.Timing.Stale })},
	{"check", "gateway staleness check period", dur(func(c *Config) *time.Duration { return &c.Timing.Check })},
	{"renew", "lease renewal interval", dur(func(c *Config) *time.Duration { return &c.Timing.Renew })},
	{"renew-jitter", "± fraction of each renewal round", frac(func(c *Config) *float64 { return &c.Timing.RenewJitter })},
	{"ttl", "lease time to live after its last renewal", dur(func(c *Config) *time.Duration { return &c.Timing.TTL })},
	{"debounce", "offline debounce", dur(func(c *Config) *time.Duration { return &c.Timing.Debounce })},
	{"idle", "idle time before a lease or view actor passivates", dur(func(c *Config) *time.Duration { return &c.Timing.Idle })},
	{"batch-window", "how often a connection's batched subscriptions are sent, merged (seed 5s, fast 50ms; 10ms to 1m)", dur(func(c *Config) *time.Duration { return &c.Timing.BatchWindow })},
	{"idle-after", "a device's declared active turns idle after this long unless declared again", dur(func(c *Config) *time.Duration { return &c.Timing.IdleAfter })},
	{"state-sync-timeout", "a device whose heartbeats drifted is closed with 4409 if it does not answer the state sync within this", dur(func(c *Config) *time.Duration { return &c.Timing.StateSync })},
	{"battery-factor", "heartbeat interval and stale multiple of the battery class (?class=battery), in [2, 10]", intField(func(c *Config) *int { return &c.Timing.BatteryFactor })},
}

// EnvName is the environment variable of a flag: PRESENCE_ and the flag in
// upper case with dashes as underscores.
func EnvName(flagName string) string {
	return "PRESENCE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Load builds a Config from command-line args (without the program name), the
// environment (getenv) and the YAML file named by --config, then validates
// it. Usage and errors go to stderr-like out. A returned error means the
// node must not start; it wraps ErrInvalid for invalid values and
// flag.ErrHelp for -h.
func Load(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	ls, err := readLayers(args, getenv, out)
	if err != nil {
		return Config{}, err
	}
	c := Default()
	for _, l := range ls {
		if v, ok := l.vals["timing"]; ok {
			c.Preset = v
		}
	}
	t, err := Preset(c.Preset)
	if err != nil {
		return Config{}, err
	}
	c.Timing = t
	for _, l := range ls {
		for _, f := range fields {
			v, ok := l.vals[f.name]
			if !ok {
				continue
			}
			if err := f.set(&c, v); err != nil {
				return Config{}, fmt.Errorf("%w: %s %q from %s: %v", ErrInvalid, f.name, v, l.origin, err)
			}
		}
	}
	if c.NodeID == "" {
		c.NodeID = defaultNodeID()
	}
	return c, errors.Join(c.readFiles(), c.Validate())
}

// layer is the values one source gives, by flag name.
type layer struct {
	origin string
	vals   map[string]string
}

// readLayers parses the flags and reads the YAML file and the environment:
// the layers, lowest precedence first.
func readLayers(args []string, getenv func(string) string, out io.Writer) ([]layer, error) {
	fs := flag.NewFlagSet("presenced", flag.ContinueOnError)
	fs.SetOutput(out)
	flagVals := map[string]*string{}
	configPath := fs.String("config", "", "YAML file of parameters (keys are the flag names)")
	timing := fs.String("timing", "", "timing preset: seed or fast (default seed)")
	for _, f := range fields {
		flagVals[f.name] = register(fs, f)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", ErrInvalid, fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fileVals := map[string]string{}
	path := *configPath
	if !set["config"] {
		path = getenv(EnvName("config"))
	}
	if path != "" {
		if err := readYAML(path, fileVals); err != nil {
			return nil, err
		}
	}
	envVals := map[string]string{}
	for _, name := range append([]string{"timing"}, names()...) {
		if v, ok := lookup(getenv, EnvName(name)); ok {
			envVals[name] = v
		}
	}
	cliVals := map[string]string{}
	for name := range set {
		switch name {
		case "config":
		case "timing":
			cliVals[name] = *timing
		default:
			cliVals[name] = *flagVals[name]
		}
	}
	return []layer{{"config file " + path, fileVals}, {"environment", envVals}, {"flag", cliVals}}, nil
}

// register defines f's flag; switches take no value.
func register(fs *flag.FlagSet, f field) *string {
	p := new(string)
	switch {
	case switches[f.name]:
		fs.BoolFunc(f.name, f.usage, func(v string) error { *p = v; return nil })
	case repeatable[f.name]:
		fs.Func(f.name, f.usage, func(v string) error {
			if *p != "" {
				v = *p + "," + v
			}
			*p = v
			return nil
		})
	default:
		fs.StringVar(p, f.name, "", f.usage)
	}
	return p
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// readFiles takes the secrets named by the *-file parameters, so that they
// need not appear in a process listing or the environment. A file and its
// value both given is refused: which one wins would be a guess.
func (c *Config) readFiles() error {
	for _, f := range []struct {
		name, path string
		into       *string
		isDefault  bool
	}{{"secret", c.files.secret, &c.Secret, c.Secret == DevSecret}, {"admin-token", c.files.adminToken, &c.AdminToken, c.AdminToken == ""},
		{"cluster-key", c.files.clusterKey, &c.ClusterKey, c.ClusterKey == ""}, {"webhook-secret", c.files.webhookSecret, &c.WebhookSecret, c.WebhookSecret == ""}} {
		if f.path == "" {
			continue
		}
		if !f.isDefault {
			return fmt.Errorf("%w: %s and %s-file are both set: give one", ErrInvalid, f.name, f.name)
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return fmt.Errorf("%w: %s-file: %v", ErrInvalid, f.name, err)
		}
		lines := strings.Split(strings.TrimRight(string(b), "\r\n"), "\n")
		*f.into = strings.TrimRight(lines[0], "\r")
		if f.name != "secret" {
			continue
		}
		for _, l := range lines[1:] {
			if l = strings.TrimSpace(l); l != "" {
				c.SecretPrevious = append(c.SecretPrevious, l)
			}
		}
	}
	return nil
}

func names() []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.name
	}
	return out
}

func lookup(getenv func(string) string, key string) (string, bool) {
	v := getenv(key)
	return v, v != ""
}

func readYAML(path string, into map[string]string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: config file: %v", ErrInvalid, err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("%w: config file %s: %v", ErrInvalid, path, err)
	}
	known := map[string]bool{"timing": true}
	for _, n := range names() {
		known[n] = true
	}
	for k, v := range raw {
		if !known[k] {
			return fmt.Errorf("%w: config file %s: unknown key %q", ErrInvalid, path, k)
		}
		if v == nil { // "key:" or "key: ~" is empty, not "<nil>"
			into[k] = ""
			continue
		}
		if list, ok := v.([]any); ok { // join may be a YAML list
			parts := make([]string, len(list))
			for i, p := range list {
				parts[i] = fmt.Sprint(p)
			}
			into[k] = strings.Join(parts, ",")
			continue
		}
		into[k] = fmt.Sprint(v)
	}
	return nil
}

func defaultNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}
