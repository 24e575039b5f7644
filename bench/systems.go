package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/presence-im/presence/core"
)

// system is one side of the comparison: started fresh for every run.
type system interface {
	Name() string
	URLs() []string // device WebSockets, one per node (load process w dials the w-th, round)
	Pids() []int    // every process whose CPU and memory count
	Heap() (float64, error)
	// LiveHeap is the Go heap right after a forced collection (the peer's
	// plus Redis's used_memory): what the system holds, not its garbage.
	LiveHeap() (float64, error)
	// LookupAddr is where lookups go (host:port), LookupRequest a whole
	// HTTP/1.1 request for one user's presence (lookupClient).
	LookupAddr() string
	LookupRequest(user string) []byte
	// Allow lets subs see target (presence: a policy; the peer has none).
	Allow(target string, subs []string) error
	// Debounce is waited by design before an offline is published; the
	// fan-out latency is counted from the close plus this.
	Debounce() time.Duration
	// ServerCloses are the connections the server closed, by code.
	ServerCloses() string
	Stop()
}

// proc is a child process with its log in the run's directory.
type proc struct {
	cmd *exec.Cmd
	log *os.File
}

func startProc(dir, name, bin string, args ...string) (*proc, error) {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("bench: start %s: %w", bin, err)
	}
	return &proc{cmd: cmd, log: log}, nil
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.log.Close()
}

// waitHTTP polls url until it answers 200 or the deadline passes.
func waitHTTP(url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %s not ready within %v (last: %v)", url, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// presenceSys is Options.Nodes presenced nodes in one cluster sharing
// their default store (one SQLite file in the run's directory), the seed
// timings scaled to the heartbeat interval.
type presenceSys struct {
	nodes        []*proc
	ws, admin    []string
	token        string
	debounce     time.Duration
	settled      time.Time // a cluster's views have settled (docs/bounds.md)
	lastStart    time.Time // the last node's process started
	closesBefore string
	hooks        *hookSink // with Options.Webhook: the nodes' one endpoint
}

const benchSecret = "loadbench-secret-not-for-production"

func startPresence(o Options, dir string) (system, error) {
	s := &presenceSys{token: "loadbench-admin", debounce: o.Debounce}
	var hookArgs []string
	if o.Webhook {
		h, err := startHookSink()
		if err != nil {
			return nil, err
		}
		s.hooks, hookArgs = h, []string{"--webhook-url", h.url, "--webhook-secret", benchHookSecret}
	}
	var join string
	for i := range max(o.Nodes, 1) {
		ports := make([]int, 3)
		for k := range ports {
			var err error
			if ports[k], err = freePort(); err != nil {
				s.Stop()
				return nil, err
			}
		}
		ws, adm, gossip := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprintf("127.0.0.1:%d", ports[2])
		args := append(presenceArgs(o, dir, s.token), "--node-id", fmt.Sprintf("bench%d", i+1), "--listen", ws, "--admin", adm, "--gossip", gossip)
		args = append(args, hookArgs...)
		if join != "" {
			args = append(args, "--join", join)
		}
		s.lastStart = time.Now()
		p, err := startProc(dir, fmt.Sprintf("presenced%d", i+1), filepath.Join(o.Bin, "presenced"), args...)
		if err != nil {
			s.Stop()
			return nil, err
		}
		s.nodes, s.ws, s.admin, join = append(s.nodes, p), append(s.ws, ws), append(s.admin, adm), gossip
		if err := waitHTTP("http://"+adm+"/readyz", 30*time.Second); err != nil {
			s.Stop()
			return nil, err
		}
	}
	if err := s.converge(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// presenceArgs are every node's flags but its id and addresses.
func presenceArgs(o Options, dir, token string) []string {
	dsn := o.DSN
	if dsn == "" {
		dsn = "sqlite:" + filepath.Join(dir, "presence.db")
	}
	args := []string{"--policy-dsn", dsn, "--admin-token", token, "--secret", benchSecret,
		"--heartbeat", o.Interval.String(), "--stale", (o.Interval * 5 / 2).String(), "--check", (o.Interval / 5).String(),
		"--debounce", o.Debounce.String(), "--admit-rate", "1000000", "--admit-burst", "1000000"}
	if o.Renew > 0 {
		args = append(args, "--renew", o.Renew.String(), "--ttl", (o.Renew * 5 / 2).String())
	}
	if o.Nodes > 1 {
		args = append(args, "--cluster-key", "loadbench-cluster-key-0123456789")
	}
	return append(args, o.NodeArgs...)
}

func (s *presenceSys) Name() string   { return "presence" }
func (s *presenceSys) URLs() []string { return prefixed("ws://", s.ws, "/ws") }
func (s *presenceSys) Pids() []int {
	var pids []int
	for _, p := range s.nodes {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

func prefixed(pre string, addrs []string, post string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = pre + a + post
	}
	return out
}

// Debounce is what the view waits on purpose after a departure reaches it:
// the debounce less the delivery budget it keeps for the hops (core.DeliveryBudget).
func (s *presenceSys) Debounce() time.Duration { return s.debounce - core.DeliveryBudget(s.debounce) }
func (s *presenceSys) Stop() {
	for _, p := range s.nodes {
		p.stop()
	}
	if s.hooks != nil {
		s.hooks.close()
	}
}

func (s *presenceSys) get(c *http.Client, path string) (*http.Response, error) {
	return s.getFrom(c, 0, path)
}

// getFrom asks node i.
func (s *presenceSys) getFrom(c *http.Client, i int, path string) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.admin[i]+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	return c.Do(req)
}

// metrics reads the samples of /metrics whose name starts with prefix,
// summed over the nodes.
func (s *presenceSys) metrics(prefix string) (map[string]float64, error) {
	m := map[string]float64{}
	for i := range s.admin {
		res, err := s.getFrom(http.DefaultClient, i, "/metrics")
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, prefix) {
				k := strings.LastIndexByte(l, ' ')
				v, _ := strconv.ParseFloat(l[k+1:], 64)
				m[l[:k]] += v
			}
		}
		res.Body.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// LiveHeap forces a collection on every node (GET /debug/pprof/heap?gc=1)
// and then reads the heap allocated, which is the live heap plus what the
// few milliseconds between allocated.
func (s *presenceSys) LiveHeap() (float64, error) {
	for i := range s.admin {
		res, err := s.getFrom(http.DefaultClient, i, "/debug/pprof/heap?gc=1")
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	m, err := s.metrics("go_memstats_heap_alloc_bytes")
	return m["go_memstats_heap_alloc_bytes"], err
}

func (s *presenceSys) Heap() (float64, error) {
	m, err := s.metrics("go_memstats_heap_inuse_bytes")
	return m["go_memstats_heap_inuse_bytes"], err
}

// fanoutWrites is the nodes' own share of the fan-out: the mean, over
// every event and node, of the time from the view handing an event to the
// node's fan-out to the last socket write (presence_fanout_seconds; the
// online events of the rounds included), and the events over 50 ms.
func (s *presenceSys) fanoutWrites() string {
	m, err := s.metrics("presence_fanout_seconds")
	if err != nil {
		return err.Error()
	}
	n := m["presence_fanout_seconds_count"]
	if n == 0 {
		return ""
	}
	over := n - m[`presence_fanout_seconds_bucket{le="0.05"}`]
	return fmt.Sprintf("node fan-out (the view's hand-over to the last socket write, presence_fanout_seconds): %.0f events, mean %.1f ms, %.0f over 50 ms%s",
		n, 1000*m["presence_fanout_seconds_sum"]/n, over, s.beforeHandOver())
}

// beforeHandOver is the nodes' share before the fan-out: the mean time
// from a closed device's departure to its view's published offline
// (presence_offline_detection_seconds, mode close) past the view's
// deliberate wait (Debounce), the hops from the socket to the view and
// the view's own work.
func (s *presenceSys) beforeHandOver() string {
	m, err := s.metrics("presence_offline_detection_seconds")
	if err != nil {
		return "; " + err.Error()
	}
	n := m[`presence_offline_detection_seconds_count{mode="close"}`]
	if n == 0 {
		return ""
	}
	mean := m[`presence_offline_detection_seconds_sum{mode="close"}`] / n
	return fmt.Sprintf("; before it, a close's departure to the published offline past the debounce's wait (presence_offline_detection_seconds): %.0f offlines, mean %.1f ms",
		n, 1000*mean-float64(s.Debounce().Microseconds())/1000)
}

func (s *presenceSys) ServerCloses() string {
	m, err := s.metrics("presence_ws_server_closes_total")
	if err != nil {
		return err.Error()
	}
	var parts []string
	for k, v := range m {
		if v > 0 {
			code := strings.TrimSuffix(strings.TrimPrefix(k, `presence_ws_server_closes_total{code="`), `"}`)
			parts = append(parts, fmt.Sprintf("%s:%g", code, v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// converge waits until the first node sees every node alive, and notes
// when the cluster's views settle: a view activated within settle of a
// membership change that moved it holds a departure until then
// (docs/bounds.md), so the fan-out waits for it.
func (s *presenceSys) converge() error {
	if len(s.nodes) < 2 {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var c struct {
			Members []struct{ State string } `json:"members"`
		}
		alive := 0
		if res, err := s.get(http.DefaultClient, "/api/cluster"); err == nil {
			_ = json.NewDecoder(res.Body).Decode(&c)
			res.Body.Close()
		}
		for _, m := range c.Members {
			if m.State == "alive" {
				alive++
			}
		}
		if alive == len(s.nodes) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: the first node sees %d of %d members alive", alive, len(s.nodes))
		}
		time.Sleep(50 * time.Millisecond)
	}
	var b struct {
		Timing struct {
			SettleMs int64 `json:"settle_ms"`
		} `json:"timing"`
	}
	res, err := s.get(http.DefaultClient, "/api/bounds")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&b); err != nil {
		return err
	}
	s.settled = time.Now().Add(time.Duration(b.Timing.SettleMs) * time.Millisecond)
	return nil
}

// Settled is when the fan-out may start.
func (s *presenceSys) Settled() time.Time { return s.settled }

func (s *presenceSys) LookupAddr() string { return s.admin[0] }
func (s *presenceSys) LookupRequest(user string) []byte {
	return lookupRequest(s.admin[0], "/api/presence/"+user, "Authorization: Bearer "+s.token)
}

func (s *presenceSys) Allow(target string, subs []string) error {
	b, _ := json.Marshal(map[string]any{"granularity": "exact", "contacts": subs})
	req, _ := http.NewRequest(http.MethodPut, "http://"+s.admin[0]+"/api/users/"+target+"/policy", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		body, _ := io.ReadAll(res.Body)
		return fmt.Errorf("bench: policy of %s: %s %s", target, res.Status, body)
	}
	return nil
}

// peerSys is redis-server (no persistence, as presence keeps leases in
// memory) and Options.Nodes peer processes in front of it.
type peerSys struct {
	redis   *proc
	peers   []*proc
	ws, api []string
}

func startPeer(o Options, dir string) (system, error) {
	rport, err := freePort()
	if err != nil {
		return nil, err
	}
	rd, err := startProc(dir, "redis", o.RedisServer, "--port", strconv.Itoa(rport), "--bind", "127.0.0.1",
		"--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no", "--maxclients", "1000")
	if err != nil {
		return nil, err
	}
	s := &peerSys{redis: rd}
	for i := range max(o.Nodes, 1) {
		var ports [2]int
		for k := range ports {
			if ports[k], err = freePort(); err != nil {
				s.Stop()
				return nil, err
			}
		}
		ws, api := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
		p, err := startProc(dir, fmt.Sprintf("peer%d", i+1), o.Self, "peer", "--listen", ws, "--http", api,
			"--redis", fmt.Sprintf("127.0.0.1:%d", rport), "--secret", benchSecret,
			"--heartbeat", o.Interval.String(), "--ttl", (o.Interval * 3).String())
		if err != nil {
			s.Stop()
			return nil, err
		}
		s.peers, s.ws, s.api = append(s.peers, p), append(s.ws, ws), append(s.api, api)
		if err := waitHTTP("http://"+api+"/stats", 30*time.Second); err != nil {
			s.Stop()
			return nil, err
		}
	}
	return s, nil
}

func (s *peerSys) Name() string                 { return "redis-ttl" }
func (s *peerSys) URLs() []string               { return prefixed("ws://", s.ws, "/ws") }
func (s *peerSys) Debounce() time.Duration      { return 0 }
func (s *peerSys) Allow(string, []string) error { return nil }
func (s *peerSys) ServerCloses() string         { return "n/a" }
func (s *peerSys) Pids() []int {
	pids := []int{s.redis.cmd.Process.Pid}
	for _, p := range s.peers {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}
func (s *peerSys) Stop() {
	for _, p := range s.peers {
		p.stop()
	}
	s.redis.stop()
}
func (s *peerSys) LookupAddr() string { return s.api[0] }
func (s *peerSys) LookupRequest(u string) []byte {
	return lookupRequest(s.api[0], "/presence/"+u)
}

// Heap is the peers' Go heap plus Redis's used_memory.
func (s *peerSys) Heap() (float64, error) { return s.heap(false) }

// LiveHeap is the peers' Go heap right after a forced collection, plus
// Redis's used_memory.
func (s *peerSys) LiveHeap() (float64, error) { return s.heap(true) }

func (s *peerSys) heap(live bool) (float64, error) {
	var total float64
	for i, api := range s.api {
		url := "http://" + api + "/stats"
		if live {
			url += "?gc=1"
		}
		res, err := http.Get(url)
		if err != nil {
			return 0, err
		}
		var st PeerStats
		err = json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close()
		if err != nil {
			return 0, err
		}
		total += float64(st.HeapInuse)
		if live {
			total += float64(st.HeapAlloc) - float64(st.HeapInuse)
		}
		if i == 0 {
			total += float64(st.RedisMemory)
		}
	}
	return total, nil
}

// profile saves the node's CPU profile over d (GET /debug/pprof/profile,
// behind the admin token) to path.
func (s *presenceSys) profilePrefix() string { return "" }

func (s *presenceSys) profile(d time.Duration, path string) {
	s.savePprof(d+30*time.Second, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(int(d.Seconds()), 1)), path)
}

// traceSpan is how long the execution traces of an idle window last.
const traceSpan = 5 * time.Second

// traces saves, after wait, an execution trace of the node (GET
// /debug/pprof/trace) and one of this process, where the lookups run,
// over the same span d: where a slow lookup waited, in the node or in its
// client (go tool trace, go tool trace -pprof=sched).
func (s *presenceSys) traces(wait, d time.Duration, dir string) {
	time.Sleep(wait)
	stamp := time.Now().Unix()
	if f, err := os.Create(filepath.Join(dir, fmt.Sprintf("trace-bench-%d.out", stamp))); err == nil {
		defer f.Close()
		if trace.Start(f) == nil {
			defer trace.Stop()
		}
	}
	s.savePprof(d+30*time.Second, fmt.Sprintf("/debug/pprof/trace?seconds=%d", max(int(d.Seconds()), 1)), filepath.Join(dir, fmt.Sprintf("trace-node-%d.out", stamp)))
}

// savePprof saves the admin address's pprof endpoint at query to path.
func (s *presenceSys) savePprof(timeout time.Duration, query, path string) {
	saveBody(s.get(&http.Client{Timeout: timeout}, query))(path)
}

// saveBody returns a func that saves the body of res (the answer of a
// profile or trace request) to path; nothing when the request failed.
func saveBody(res *http.Response, err error) func(path string) {
	return func(path string) {
		if err != nil {
			return
		}
		defer res.Body.Close()
		if f, err := os.Create(path); err == nil {
			_, _ = io.Copy(f, res.Body)
			f.Close()
		}
	}
}
