package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CentrifugoVersion is the Centrifugo release the bench compares with,
// installed into bin/ by scripts/centrifugo.sh (go install through the Go
// module proxy; never a dependency of this module).
const CentrifugoVersion = "v6.9.1"

// centrifugoNS is the namespace of every channel the bench uses: a
// personal channel per device's user, cf:<user>, with presence and
// join/leave pushed to every subscriber.
const centrifugoNS = "cf"

// centrifugoAPIKey is the server API key of the presence call.
const centrifugoAPIKey = "loadbench-api-key"

// centrifugoChannel is user's personal channel.
func centrifugoChannel(user string) string { return centrifugoNS + ":" + user }

// centrifugoSys is one Centrifugo node with its memory engine, started from
// a config file generated for the run (centrifugoConfig).
type centrifugoSys struct {
	node *proc
	addr string // host:port of its one HTTP server: WebSocket, server API, /metrics, /health
}

// centrifugoConfig is the run's config: HMAC (HS256) connection tokens
// signed with secret, the load processes' token key; the server pings every device each
// interval and waits at most 9/10 of it for the pong (Centrifugo requires
// the pong timeout below the interval); the memory engine; one namespace
// whose channels keep presence and push join and leave to every
// subscriber; no limit on connections, per user or per second (the load
// is 19,000 devices from a few addresses); the server API behind a key;
// Go and process metrics on /metrics.
func centrifugoConfig(port int, interval time.Duration, secret string) ([]byte, error) {
	cfg := map[string]any{
		"http_server": map[string]any{"address": "127.0.0.1", "port": port},
		"log":         map[string]any{"level": "info"},
		"engine":      map[string]any{"type": "memory"},
		"client": map[string]any{
			"token":                 map[string]any{"hmac_secret_key": secret},
			"ping_interval":         interval.String(),
			"pong_timeout":          (interval * 9 / 10).String(),
			"connection_limit":      0,
			"user_connection_limit": 0,
			"connection_rate_limit": 0,
		},
		"channel": map[string]any{
			"namespaces": []map[string]any{{
				"name":                       centrifugoNS,
				"presence":                   true,
				"join_leave":                 true,
				"force_push_join_leave":      true,
				"allow_subscribe_for_client": true,
			}},
		},
		"http_api":    map[string]any{"key": centrifugoAPIKey},
		"prometheus":  map[string]any{"enabled": true},
		"health":      map[string]any{"enabled": true},
		"debug":       map[string]any{"enabled": true}, // /debug/pprof: a forced collection for the live heap
		"usage_stats": map[string]any{"disabled": true},
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// startCentrifugo writes the config into the run's directory and starts
// the node on a free loopback port, ready when /health answers.
func startCentrifugo(o Options, dir string) (system, error) {
	bin := o.centrifugoBin()
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("bench: no centrifugo at %s (sh scripts/centrifugo.sh installs %s): %w", bin, CentrifugoVersion, err)
	}
	if o.Nodes > 1 {
		return nil, fmt.Errorf("bench: centrifugo runs one node (memory engine), not %d", o.Nodes)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg, err := centrifugoConfig(port, o.Interval, cmp.Or(o.Secret, benchSecret))
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "centrifugo.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		return nil, err
	}
	p, err := startProc(dir, "centrifugo", bin, "--config", path)
	if err != nil {
		return nil, err
	}
	s := &centrifugoSys{node: p, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	if err := waitHTTP("http://"+s.addr+"/health", 30*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *centrifugoSys) Name() string                 { return "centrifugo" }
func (s *centrifugoSys) URLs() []string               { return []string{"ws://" + s.addr + "/connection/websocket"} }
func (s *centrifugoSys) Pids() []int                  { return []int{s.node.cmd.Process.Pid} }
func (s *centrifugoSys) Debounce() time.Duration      { return 0 } // a leave is pushed at once
func (s *centrifugoSys) Allow(string, []string) error { return nil }
func (s *centrifugoSys) Stop()                        { s.node.stop() }
func (s *centrifugoSys) LookupAddr() string           { return s.addr }

// LookupRequest is the server API's presence call on user's channel; the
// transport error mode answers a failed call with an HTTP error status,
// which the lookup client counts.
func (s *centrifugoSys) LookupRequest(user string) []byte {
	body := `{"channel":"` + centrifugoChannel(user) + `"}`
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST /api/presence HTTP/1.1\r\nHost: %s\r\nX-API-Key: %s\r\nX-Centrifugo-Error-Mode: transport\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", s.addr, centrifugoAPIKey, len(body), body)
	return b.Bytes()
}

// metrics reads the samples of /metrics whose name starts with prefix.
func (s *centrifugoSys) metrics(prefix string) (map[string]float64, error) {
	res, err := http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, prefix) {
			k := strings.LastIndexByte(l, ' ')
			v, _ := strconv.ParseFloat(l[k+1:], 64)
			m[l[:k]] += v
		}
	}
	return m, sc.Err()
}

func (s *centrifugoSys) profilePrefix() string { return "centrifugo-" }

// profile saves Centrifugo's CPU profile over d (its pprof endpoint, on
// for the bench: centrifugoConfig) to path.
func (s *centrifugoSys) profile(d time.Duration, path string) {
	c := &http.Client{Timeout: d + 30*time.Second}
	saveBody(c.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", s.addr, max(int(d.Seconds()), 1))))(path)
}

// LiveHeap forces a collection (its pprof endpoint, GET
// /debug/pprof/heap?gc=1) and then reads the heap allocated.
func (s *centrifugoSys) LiveHeap() (float64, error) {
	res, err := http.Get("http://" + s.addr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("bench: centrifugo's /debug/pprof/heap: %s", res.Status)
	}
	const name = "go_memstats_heap_alloc_bytes"
	m, err := s.metrics(name)
	if err != nil {
		return 0, err
	}
	v, ok := m[name]
	if !ok {
		return 0, errors.New("bench: centrifugo's /metrics has no " + name)
	}
	return v, nil
}

// Heap is the node's Go heap in use (its Prometheus Go collector).
func (s *centrifugoSys) Heap() (float64, error) {
	m, err := s.metrics("go_memstats_heap_inuse_bytes")
	if err != nil {
		return 0, err
	}
	v, ok := m["go_memstats_heap_inuse_bytes"]
	if !ok {
		return 0, errors.New("bench: centrifugo's /metrics has no go_memstats_heap_inuse_bytes")
	}
	return v, nil
}

// ServerCloses are the disconnects the node chose, by code
// (centrifugo_client_num_server_disconnects).
func (s *centrifugoSys) ServerCloses() string {
	const name = "centrifugo_client_num_server_disconnects"
	m, err := s.metrics(name)
	if err != nil {
		return err.Error()
	}
	byCode := map[string]float64{}
	for k, v := range m {
		if _, rest, ok := strings.Cut(k, `code="`); ok && v > 0 {
			code, _, _ := strings.Cut(rest, `"`)
			byCode[code] += v
		}
	}
	var parts []string
	for c, v := range byCode {
		parts = append(parts, fmt.Sprintf("%s:%g", c, v))
	}
	if len(parts) == 0 {
		return "none"
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// centrifugoBin is Options.Centrifugo, or centrifugo beside presenced.
func (o Options) centrifugoBin() string {
	if o.Centrifugo != "" {
		return o.Centrifugo
	}
	return filepath.Join(o.Bin, "centrifugo")
}

// centrifugoToken is a connection token for user: a JWT signed with HS256
// under key, its subject the user, expiring after ttl.
func centrifugoToken(key []byte, user string, ttl time.Duration) string {
	enc := base64.RawURLEncoding
	claims, _ := json.Marshal(map[string]any{"sub": user, "exp": time.Now().Add(ttl).Unix()})
	signed := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signed))
	return signed + "." + enc.EncodeToString(mac.Sum(nil))
}

// defaultSystems are presence and the Redis-TTL peer, and Centrifugo where
// its binary is installed and the run is on one node (it runs one).
func (o Options) defaultSystems() []string {
	sys := []string{"presence", "redis-ttl"}
	if _, err := os.Stat(o.centrifugoBin()); err == nil && o.Nodes <= 1 {
		sys = append(sys, "centrifugo")
	}
	return sys
}
