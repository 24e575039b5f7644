package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/internal/freeport"
)

// Cluster is a local cluster of presenced processes on free loopback ports,
// sharing one SQLite store in Dir. It is the one multi-process harness:
// the chaos scenarios and the tests of cmd/presenced both run on it.
type Cluster struct {
	Bin    string   // presenced binary (process backend)
	Docker *Docker  // containers instead of processes, when set
	Dir    string   // store and node logs
	Preset string   // timing preset, "fast" unless set
	Secret string   // device-token key
	Key    string   // cluster key; "": a random one, made by the first node
	NoKey  bool     // no cluster key (a node's own flags may give one)
	Args   []string // more flags for every node
	Nodes  []*Node
	// Isolate (process backend, root): each node on a loopback address
	// and a group id of its own, so that a firewall can partition them
	// (partition.go).
	Isolate bool
	// ReadyWithin is how long a node may take to get ready; 0: 20 s. One
	// that runs but is not ready by then is ended with SIGQUIT, so its log
	// ends with its goroutines' stacks.
	ReadyWithin time.Duration

	seq   int
	fw    *firewall // with Isolate
	marks marks     // every fault injected, when (Marks)
}

// Node is one presenced, a process or a container.
type Node struct {
	ID                    string
	Listen, Admin, Gossip string

	run     runner
	logPath string   // the process backend's log, written as it runs
	gid     int      // its group id, with Cluster.Isolate
	extra   []string // its own flags, after the cluster's
	// Token is its admin token (the last --admin-token of its flags),
	// sent with every admin request.
	Token string
	marks *marks // its cluster's: Kill, Pause, Resume, Terminate, starts
}

// runner is how a node runs: a local process or a container.
type runner interface {
	kill()                  // kill -9, and wait for the end
	terminate() error       // SIGTERM: a graceful stop
	pause() error           // SIGSTOP / docker pause
	resume() error          // SIGCONT / docker unpause
	quit() error            // SIGQUIT: Go's runtime writes every goroutine's stack to the log and exits
	alive() bool            // still running
	exitErr() error         // why it ended
	collect(dir, id string) // leave its log in dir/id.log
}

// process runs presenced as a child process.
type process struct {
	cmd  *exec.Cmd
	logs *os.File
	done chan struct{}
	mu   sync.Mutex
	err  error // the process's exit, once done
}

func (p *process) kill() {
	if p.alive() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}
func (p *process) terminate() error { return p.cmd.Process.Signal(syscall.SIGTERM) }
func (p *process) pause() error     { return p.cmd.Process.Signal(syscall.SIGSTOP) }
func (p *process) resume() error    { return p.cmd.Process.Signal(syscall.SIGCONT) }
func (p *process) quit() error      { return p.cmd.Process.Signal(syscall.SIGQUIT) }
func (p *process) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}
func (p *process) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}
func (p *process) collect(string, string) {} // it wrote dir/id.log itself

// Build compiles presenced into dir (from the module this runs in).
func Build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "presenced")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/presence-im/presence/cmd/presenced").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("chaos: building presenced: %w\n%s", err, out)
	}
	return bin, nil
}

func randomKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b) // 32 bytes
}

// FreePort is a port on host free for TCP and UDP, below the kernel's
// ephemeral range (freeport.On).
func FreePort(host string) (string, error) { return freeport.On(host) }

// Start starts n nodes, the first starting the cluster and the others
// joining it, and waits until every node sees all of them alive.
func (c *Cluster) Start(ctx context.Context, n int) error {
	if c.Isolate && c.Docker == nil {
		fw, err := newFirewall()
		if err != nil {
			return err
		}
		c.fw, fw.marks = fw, &c.marks
	}
	for range n {
		if _, err := c.AddNode(ctx); err != nil {
			return err
		}
	}
	return c.Converged(ctx, c.Nodes...)
}

// AddNode starts one more node, joining the first alive one, and waits
// until it is ready.
func (c *Cluster) AddNode(ctx context.Context) (*Node, error) {
	c.seq++
	return c.StartNode(ctx, fmt.Sprintf("n%d", c.seq))
}

// StartNode starts a node named id with extra flags (after the cluster's
// own) and waits until it is ready; a node that started but is not ready
// comes back with the error. A free port picked for it can be taken by
// another process before the node binds it (tests run side by side): a
// node that exits on that gets fresh ports, up to three times.
func (c *Cluster) StartNode(ctx context.Context, id string, extra ...string) (*Node, error) {
	for try := 1; ; try++ {
		nd, err := c.startNode(ctx, &Node{ID: id, extra: extra})
		if err == nil || try == 3 || nd == nil || nd.Alive() || !strings.Contains(nd.Log(), "address already in use") {
			return nd, err
		}
		c.Nodes = slices.DeleteFunc(c.Nodes, func(n *Node) bool { return n == nd })
	}
}

// StartAgain starts nd, which has ended, again under its id and addresses
// with extra flags instead of its own (process backend), and waits until
// it is ready.
func (c *Cluster) StartAgain(ctx context.Context, nd *Node, extra ...string) error {
	if c.Docker != nil {
		return fmt.Errorf("chaos: starting %s again: process backend only", nd.ID)
	}
	if nd.Alive() {
		return fmt.Errorf("chaos: starting %s again: it still runs", nd.ID)
	}
	nd.extra = extra
	c.marks.add(nd.ID, "start")
	run, err := c.startProcess(nd, c.args(nd))
	if err != nil {
		return err
	}
	nd.run = run
	if err := nd.WaitReady(ctx, c.readyWithin()); err != nil {
		nd.dumpIfStuck()
		return err
	}
	return nil
}

func (c *Cluster) startNode(ctx context.Context, nd *Node) (*Node, error) {
	var err error
	nd.marks = &c.marks
	nd.marks.add(nd.ID, "start")
	if c.Docker != nil {
		nd.run, err = c.Docker.start(ctx, nd, c.Dir, c.args(nd))
	} else {
		nd.run, err = c.startProcess(nd, c.args(nd))
	}
	if err != nil {
		return nil, err
	}
	c.Nodes = append(c.Nodes, nd)
	if err := nd.WaitReady(ctx, c.readyWithin()); err != nil {
		nd.dumpIfStuck()
		return nd, err // started: its log may say why it is not ready
	}
	return nd, nil
}

func (c *Cluster) readyWithin() time.Duration {
	if c.ReadyWithin > 0 {
		return c.ReadyWithin
	}
	return 20 * time.Second
}

// dumpIfStuck ends a node that runs but never got ready with SIGQUIT, so
// that its log ends with where each goroutine was (a start-up that hangs
// leaves no other trace), and waits up to 5 s for it to exit.
func (n *Node) dumpIfStuck() {
	if !n.Alive() || n.run.quit() != nil {
		return
	}
	_, _ = n.Wait(5 * time.Second)
}

// args are nd's flags: the preset, its id, the keys, the cluster's Args
// and its own, and unless those name a seed the first other alive node to
// join.
func (c *Cluster) args(nd *Node) []string {
	args := []string{"--timing", c.preset(), "--node-id", nd.ID, "--secret", c.Secret, "--drain-spread", DrainSpread.String()}
	if !c.NoKey {
		if c.Key == "" {
			// Every cluster runs as production does: gossip encrypted and the
			// actor transport on mutual TLS, under every fault.
			c.Key = randomKey()
		}
		args = append(args, "--cluster-key", c.Key)
	}
	args = append(append(args, c.Args...), nd.extra...)
	nd.Token = lastFlag(args, "--admin-token")
	if slices.Contains(args, "--join") {
		return args
	}
	for _, o := range c.Nodes {
		if o != nd && o.Alive() {
			return append(args, "--join", o.Gossip)
		}
	}
	return args
}

// lastFlag is the value of the last flag name in args (the one a node
// takes), or "".
func lastFlag(args []string, name string) string {
	for i := len(args) - 2; i >= 0; i-- {
		if args[i] == name {
			return args[i+1]
		}
	}
	return ""
}

// DrainSpread is the nodes' --drain-spread: on SIGTERM a node closes its
// devices over this long.
const DrainSpread = 2 * time.Second

// Restart stops nd with SIGTERM (it drains), waits for its exit, and
// starts it again under the same id, addresses and flags (process
// backend).
func (c *Cluster) Restart(ctx context.Context, nd *Node) error {
	if _, ok := nd.run.(*process); !ok {
		return fmt.Errorf("chaos: restarting %s: process backend only", nd.ID)
	}
	_ = nd.Terminate()
	if ended, _ := nd.Wait(DrainSpread + 15*time.Second); !ended {
		nd.Kill()
		return fmt.Errorf("chaos: %s did not exit after SIGTERM", nd.ID)
	}
	return c.StartAgain(ctx, nd, nd.extra...)
}

func (c *Cluster) startProcess(nd *Node, args []string) (runner, error) {
	restart := nd.Listen != "" // the same addresses (and group)
	host := "127.0.0.1"
	if c.Isolate && !restart {
		host, nd.gid = isolation(c.seq)
	}
	for _, p := range []*string{&nd.Listen, &nd.Admin, &nd.Gossip} {
		if *p != "" {
			continue
		}
		a, err := FreePort(host)
		if err != nil {
			return nil, err
		}
		*p = a
	}
	// The defaults first: a flag given again in args wins.
	args = append([]string{"--listen", nd.Listen, "--admin", nd.Admin, "--gossip", nd.Gossip,
		"--policy-dsn", "sqlite:" + filepath.Join(c.Dir, "presence.db")}, args...)
	nd.logPath = filepath.Join(c.Dir, nd.ID+".log")
	mode := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if restart {
		mode = os.O_CREATE | os.O_WRONLY | os.O_APPEND // one log across its lives
	}
	logs, err := os.OpenFile(nd.logPath, mode, 0o644)
	if err != nil {
		return nil, err
	}
	p := &process{cmd: exec.Command(c.Bin, args...), logs: logs, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = logs, logs
	p.cmd.SysProcAttr = nodeProcAttr(nd.gid)
	if err := p.cmd.Start(); err != nil {
		logs.Close()
		return nil, fmt.Errorf("chaos: starting %s: %w", nd.ID, err)
	}
	go func() {
		err := p.cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		logs.Close()
		close(p.done)
	}()
	return p, nil
}

// nodeProcAttr is how a node process starts: in group gid (0: this
// process's), and killed when the thread that started it ends (Pdeathsig),
// so that a harness or a test binary that dies without stopping its
// nodes (SIGKILL, a test's timeout) leaves none running to take CPU and
// ports from the next run. No goroutine here locks its thread, so the
// thread lives as long as the process.
func nodeProcAttr(gid int) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if gid != 0 {
		a.Credential = &syscall.Credential{Uid: uint32(os.Getuid()), Gid: uint32(gid)}
	}
	return a
}

// Alive reports whether the node is still running.
func (n *Node) Alive() bool { return n.run.alive() }

// WaitReady waits until GET /readyz answers 200.
func (n *Node) WaitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		if code, _ := n.get(ctx, "/readyz", nil); code == 200 {
			return nil
		}
		if !n.Alive() {
			return fmt.Errorf("chaos: %s exited: %v", n.ID, n.run.exitErr())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: %s not ready within %v", n.ID, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Pause freezes the node (SIGSTOP; docker pause); Resume thaws it.
func (n *Node) Pause() error  { n.marks.add(n.ID, "pause"); return n.run.pause() }
func (n *Node) Resume() error { n.marks.add(n.ID, "resume"); return n.run.resume() }

// Kill is kill -9; it waits for the node to end.
func (n *Node) Kill() { n.marks.add(n.ID, "kill"); n.run.kill() }

// Terminate asks the node to stop gracefully (SIGTERM: it drains).
func (n *Node) Terminate() error { n.marks.add(n.ID, "terminate"); return n.run.terminate() }

// Wait waits up to within for the node to end: whether it did, and why.
func (n *Node) Wait(within time.Duration) (ended bool, err error) {
	deadline := time.Now().Add(within)
	for n.Alive() {
		if time.Now().After(deadline) {
			return false, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true, n.run.exitErr()
}

// Log is what the node logged so far (a container's: docker logs).
func (n *Node) Log() string {
	if c, ok := n.run.(*container); ok {
		return c.logs()
	}
	if n.logPath == "" {
		return ""
	}
	b, _ := os.ReadFile(n.logPath)
	return string(b)
}

// Stop kills every node and leaves their logs in Dir.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.run.kill() // the end of the run, not a fault
		n.run.collect(c.Dir, n.ID)
	}
	if c.Docker != nil {
		c.Docker.stop()
	}
	if c.fw != nil {
		c.fw.remove()
	}
}

// Member is one member as a node's /api/cluster reports it (Addresses:
// gossip, actor).
type Member = cluster.Member

// Members is the node's view of the cluster.
func (n *Node) Members(ctx context.Context) ([]Member, error) {
	var c admin.Cluster
	code, err := n.get(ctx, "/api/cluster", &c)
	if err == nil && code != 200 {
		err = fmt.Errorf("chaos: %s /api/cluster: %d", n.ID, code)
	}
	return c.Members, err
}

// Converged waits until every node of nodes sees exactly those nodes alive.
func (c *Cluster) Converged(ctx context.Context, nodes ...*Node) error {
	want := map[string]bool{}
	for _, n := range nodes {
		want[n.ID] = true
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, n := range nodes {
		for {
			ms, _ := n.Members(ctx)
			alive := 0
			for _, m := range ms {
				if m.State == "alive" && want[m.ID] {
					alive++
				}
			}
			if alive == len(nodes) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("chaos: %s sees %d of %d members alive", n.ID, alive, len(nodes))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// Bounds is the node's GET /api/bounds.
func (n *Node) Bounds(ctx context.Context) (admin.Bounds, error) {
	var b admin.Bounds
	code, err := n.get(ctx, "/api/bounds", &b)
	if err == nil && code != 200 {
		err = fmt.Errorf("chaos: %s /api/bounds: %d", n.ID, code)
	}
	return b, err
}

// millis are a node's bounds and timings in milliseconds by their names in
// GET /api/bounds (the report's bounds_ms and timing_ms).
func millis(b admin.Bounds) (bounds, timing map[string]float64) {
	bounds = map[string]float64{
		"graceful_close_ms": float64(b.GracefulCloseMs), "half_open_ms": float64(b.HalfOpenMs),
		"gateway_crash_ms": float64(b.GatewayCrashMs), "min_lease_life_ms": float64(b.MinLeaseLifeMs),
		"owner_crash_ms": float64(b.OwnerCrashMs),
	}
	t := b.Timing
	timing = map[string]float64{
		"heartbeat_ms": float64(t.HeartbeatMs), "heartbeat_jitter": t.HeartbeatJitter, "stale_ms": float64(t.StaleMs),
		"check_ms": float64(t.CheckMs), "renew_ms": float64(t.RenewMs), "renew_jitter": t.RenewJitter,
		"ttl_ms": float64(t.TTLMs), "debounce_ms": float64(t.DebounceMs),
		"failure_detection_ms": float64(t.FailureDetectionMs), "settle_ms": float64(t.SettleMs),
		"idle_after_ms": float64(t.IdleAfterMs),
	}
	return bounds, timing
}

// Route is GET /api/route/{user}: the node of each online device, or an
// error for anything but 200 (503: unknown).
func (n *Node) Route(ctx context.Context, user string) ([]string, error) {
	var r admin.Route
	code, err := n.get(ctx, "/api/route/"+user, &r)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("chaos: route %s on %s: %d", user, n.ID, code)
	}
	var nodes []string
	for _, d := range r.Devices {
		nodes = append(nodes, d.Node)
	}
	return nodes, nil
}

// RouteDevices is GET /api/route/{user}'s devices, or an error for
// anything but 200.
func (n *Node) RouteDevices(ctx context.Context, user string) ([]admin.Device, error) {
	var r admin.Route
	code, err := n.get(ctx, "/api/route/"+user, &r)
	if err == nil && code != 200 {
		err = fmt.Errorf("chaos: route %s on %s: %d", user, n.ID, code)
	}
	return r.Devices, err
}

// PutPolicy writes a user's privacy policy.
func (n *Node) PutPolicy(ctx context.Context, user, body string) error {
	req, _ := http.NewRequestWithContext(ctx, "PUT", "http://"+n.Admin+"/api/users/"+user+"/policy", strings.NewReader(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		return fmt.Errorf("chaos: policy of %s: %d %s", user, res.StatusCode, b)
	}
	return nil
}

func (n *Node) get(ctx context.Context, path string, into any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.Admin+path, nil)
	if n.Token != "" {
		req.Header.Set("Authorization", "Bearer "+n.Token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if into != nil && res.StatusCode == 200 {
		if err := json.NewDecoder(res.Body).Decode(into); err != nil {
			return res.StatusCode, err
		}
	}
	return res.StatusCode, nil
}

// preset is the nodes' timing preset: Preset, or fast.
func (c *Cluster) preset() string {
	if c.Preset == "" {
		return "fast"
	}
	return c.Preset
}
