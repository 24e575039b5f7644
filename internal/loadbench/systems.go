package loadbench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/presence-im/presence/core"
)

// system is one side of the comparison: started fresh for every run.
type system interface {
	Name() string
	URL() string // device WebSocket
	Pids() []int // every process whose CPU and memory count
	Heap() (float64, error)
	Lookup(c *http.Client, user string) error
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
		return nil, fmt.Errorf("loadbench: start %s: %w", bin, err)
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
			return fmt.Errorf("loadbench: %s not ready within %v (last: %v)", url, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// presenceSys is one presenced node with its default store (SQLite in the
// run's directory), the seed timings scaled to the heartbeat interval.
type presenceSys struct {
	p            *proc
	ws, admin    string
	token        string
	debounce     time.Duration
	closesBefore string
}

const benchSecret = "loadbench-secret-not-for-production"

func startPresence(o Options, dir string) (system, error) {
	ports := make([]int, 3)
	for i := range ports {
		var err error
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	s := &presenceSys{ws: fmt.Sprintf("127.0.0.1:%d", ports[0]), admin: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		token: "loadbench-admin", debounce: o.Debounce}
	p, err := startProc(dir, "presenced", filepath.Join(o.Bin, "presenced"),
		"--node-id", "bench", "--listen", s.ws, "--admin", s.admin, "--gossip", fmt.Sprintf("127.0.0.1:%d", ports[2]),
		"--policy-dsn", "sqlite:"+filepath.Join(dir, "presence.db"), "--admin-token", s.token, "--secret", benchSecret,
		"--heartbeat", o.Interval.String(), "--stale", (o.Interval * 5 / 2).String(), "--check", (o.Interval / 5).String(),
		"--debounce", o.Debounce.String(), "--admit-rate", "1000000", "--admit-burst", "1000000")
	if err != nil {
		return nil, err
	}
	s.p = p
	if err := waitHTTP("http://"+s.admin+"/readyz", 30*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return s, nil
}

func (s *presenceSys) Name() string { return "presence" }
func (s *presenceSys) URL() string  { return "ws://" + s.ws + "/ws" }
func (s *presenceSys) Pids() []int  { return []int{s.p.cmd.Process.Pid} }

// Debounce is what the view waits on purpose after a departure reaches it:
// the debounce less the delivery budget it keeps for the hops (core.DeliveryBudget).
func (s *presenceSys) Debounce() time.Duration { return s.debounce - core.DeliveryBudget(s.debounce) }
func (s *presenceSys) Stop()                   { s.p.stop() }

func (s *presenceSys) get(c *http.Client, path string) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.admin+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	return c.Do(req)
}

// metrics reads the samples of /metrics whose name starts with prefix.
func (s *presenceSys) metrics(prefix string) (map[string]float64, error) {
	res, err := s.get(http.DefaultClient, "/metrics")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, prefix) {
			i := strings.LastIndexByte(l, ' ')
			m[l[:i]], _ = strconv.ParseFloat(l[i+1:], 64)
		}
	}
	return m, sc.Err()
}

func (s *presenceSys) Heap() (float64, error) {
	m, err := s.metrics("go_memstats_heap_inuse_bytes")
	return m["go_memstats_heap_inuse_bytes"], err
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
	return strings.Join(parts, ",")
}

func (s *presenceSys) Lookup(c *http.Client, user string) error {
	res, err := s.get(c, "/api/presence/"+user)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("lookup %s: %s", user, res.Status)
	}
	return nil
}

func (s *presenceSys) Allow(target string, subs []string) error {
	b, _ := json.Marshal(map[string]any{"granularity": "exact", "contacts": subs})
	req, _ := http.NewRequest(http.MethodPut, "http://"+s.admin+"/api/users/"+target+"/policy", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		body, _ := io.ReadAll(res.Body)
		return fmt.Errorf("loadbench: policy of %s: %s %s", target, res.Status, body)
	}
	return nil
}

// peerSys is redis-server (no persistence, as presence keeps leases in
// memory) and the peer process in front of it.
type peerSys struct {
	redis, peer *proc
	ws, api     string
}

func startPeer(o Options, dir string) (system, error) {
	var ports [3]int
	for i := range ports {
		var err error
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	rd, err := startProc(dir, "redis", o.RedisServer, "--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1",
		"--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no", "--maxclients", "1000")
	if err != nil {
		return nil, err
	}
	s := &peerSys{redis: rd, ws: fmt.Sprintf("127.0.0.1:%d", ports[1]), api: fmt.Sprintf("127.0.0.1:%d", ports[2])}
	s.peer, err = startProc(dir, "peer", o.Self, "peer", "--listen", s.ws, "--http", s.api,
		"--redis", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--secret", benchSecret,
		"--heartbeat", o.Interval.String(), "--ttl", (o.Interval * 3).String())
	if err != nil {
		rd.stop()
		return nil, err
	}
	if err := waitHTTP("http://"+s.api+"/stats", 30*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *peerSys) Name() string                 { return "redis-ttl" }
func (s *peerSys) URL() string                  { return "ws://" + s.ws + "/ws" }
func (s *peerSys) Pids() []int                  { return []int{s.peer.cmd.Process.Pid, s.redis.cmd.Process.Pid} }
func (s *peerSys) Debounce() time.Duration      { return 0 }
func (s *peerSys) Allow(string, []string) error { return nil }
func (s *peerSys) ServerCloses() string         { return "n/a" }
func (s *peerSys) Stop()                        { s.peer.stop(); s.redis.stop() }
func (s *peerSys) Lookup(c *http.Client, u string) error {
	return getOK(c, "http://"+s.api+"/presence/"+u)
}

// Heap is the peer's Go heap plus Redis's used_memory.
func (s *peerSys) Heap() (float64, error) {
	res, err := http.Get("http://" + s.api + "/stats")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var st PeerStats
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return 0, err
	}
	return float64(st.HeapInuse + st.RedisMemory), nil
}

func getOK(c *http.Client, url string) error {
	res, err := c.Get(url)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, res.Status)
	}
	return nil
}

// profile saves the node's CPU profile over d (GET /debug/pprof/profile,
// behind the admin token) to path.
func (s *presenceSys) profile(d time.Duration, path string) {
	s.savePprof(d+30*time.Second, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(int(d.Seconds()), 1)), path)
}

// savePprof saves the admin address's pprof endpoint at query to path.
func (s *presenceSys) savePprof(timeout time.Duration, query, path string) {
	res, err := s.get(&http.Client{Timeout: timeout}, query)
	if err != nil {
		return
	}
	defer res.Body.Close()
	if f, err := os.Create(path); err == nil {
		_, _ = io.Copy(f, res.Body)
		f.Close()
	}
}
