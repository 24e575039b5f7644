package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Cluster is a local cluster of presenced processes on free loopback ports,
// sharing one SQLite store in Dir.
type Cluster struct {
	Bin    string  // presenced binary (process backend)
	Docker *Docker // containers instead of processes, when set
	Dir    string  // store and node logs
	Preset string  // timing preset, "fast" unless set
	Secret string  // device-token key
	Key    string  // cluster key; "": a random one, made by the first AddNode
	Nodes  []*Node
	// Isolate (process backend, root): each node on a loopback address
	// and a group id of its own, so that a firewall can partition them
	// (partition.go).
	Isolate bool
	// SplitBrain, when set, is every node's --split-brain.
	SplitBrain string

	seq int
	fw  *firewall // with Isolate
}

// Node is one presenced, a process or a container.
type Node struct {
	ID                    string
	Listen, Admin, Gossip string

	run runner
	gid int // its group id, with Cluster.Isolate
}

// runner is how a node runs: a local process or a container.
type runner interface {
	kill()                  // kill -9, and wait for the end
	pause() error           // SIGSTOP / docker pause
	resume() error          // SIGCONT / docker unpause
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
func (p *process) pause() error  { return p.cmd.Process.Signal(syscall.SIGSTOP) }
func (p *process) resume() error { return p.cmd.Process.Signal(syscall.SIGCONT) }
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

func freePort(host string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Start starts n nodes, the first starting the cluster and the others
// joining it, and waits until every node sees all of them alive.
func (c *Cluster) Start(ctx context.Context, n int) error {
	if c.Isolate && c.Docker == nil {
		fw, err := newFirewall()
		if err != nil {
			return err
		}
		c.fw = fw
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
	nd := &Node{ID: fmt.Sprintf("n%d", c.seq)}
	var err error
	if c.Docker != nil {
		nd.run, err = c.Docker.start(ctx, nd, c.Dir, c.args(nd))
	} else {
		nd.run, err = c.startProcess(nd, c.args(nd))
	}
	if err != nil {
		return nil, err
	}
	c.Nodes = append(c.Nodes, nd)
	if err := nd.WaitReady(ctx, 20*time.Second); err != nil {
		return nil, err
	}
	return nd, nil
}

// args are nd's flags: the preset, its id, and the first other alive node
// to join.
func (c *Cluster) args(nd *Node) []string {
	preset := c.Preset
	if preset == "" {
		preset = "fast"
	}
	if c.Key == "" {
		// Every cluster runs as production does: gossip encrypted and the
		// actor transport on mutual TLS, under every fault.
		c.Key = randomKey()
	}
	args := []string{"--timing", preset, "--node-id", nd.ID, "--secret", c.Secret, "--cluster-key", c.Key, "--drain-spread", DrainSpread.String()}
	if c.SplitBrain != "" {
		args = append(args, "--split-brain", c.SplitBrain)
	}
	for _, o := range c.Nodes {
		if o != nd && o.Alive() {
			return append(args, "--join", o.Gossip)
		}
	}
	return args
}

// DrainSpread is the nodes' --drain-spread: on SIGTERM a node closes its
// devices over this long.
const DrainSpread = 2 * time.Second

// Restart stops nd with SIGTERM (it drains), waits for its exit, and
// starts it again under the same id and addresses (process backend).
func (c *Cluster) Restart(ctx context.Context, nd *Node) error {
	p, ok := nd.run.(*process)
	if !ok {
		return fmt.Errorf("chaos: restarting %s: process backend only", nd.ID)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(DrainSpread + 15*time.Second):
		p.kill()
		return fmt.Errorf("chaos: %s did not exit after SIGTERM", nd.ID)
	}
	run, err := c.startProcess(nd, c.args(nd))
	if err != nil {
		return err
	}
	nd.run = run
	return nd.WaitReady(ctx, 20*time.Second)
}

func (c *Cluster) startProcess(nd *Node, args []string) (runner, error) {
	host := "127.0.0.1"
	if c.Isolate {
		host, nd.gid = isolation(c.seq)
	}
	for _, p := range []*string{&nd.Listen, &nd.Admin, &nd.Gossip} {
		if *p != "" {
			continue // a restart: the same addresses
		}
		a, err := freePort(host)
		if err != nil {
			return nil, err
		}
		*p = a
	}
	args = append(args, "--listen", nd.Listen, "--admin", nd.Admin, "--gossip", nd.Gossip,
		"--policy-dsn", "sqlite:"+filepath.Join(c.Dir, "presence.db"))
	logs, err := os.OpenFile(filepath.Join(c.Dir, nd.ID+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &process{cmd: exec.Command(c.Bin, args...), logs: logs, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = logs, logs
	if nd.gid != 0 {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(os.Getuid()), Gid: uint32(nd.gid)}}
	}
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
func (n *Node) Pause() error  { return n.run.pause() }
func (n *Node) Resume() error { return n.run.resume() }

// Kill is kill -9; it waits for the node to end.
func (n *Node) Kill() { n.run.kill() }

// Stop kills every node and leaves their logs in Dir.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Kill()
		n.run.collect(c.Dir, n.ID)
	}
	if c.Docker != nil {
		c.Docker.stop()
	}
	if c.fw != nil {
		c.fw.remove()
	}
}

// Member is one member as a node's /api/cluster reports it.
type Member struct {
	ID        string   `json:"id"`
	Addresses []string `json:"addresses"` // gossip, actor
	State     string   `json:"state"`
}

// Members is the node's view of the cluster.
func (n *Node) Members(ctx context.Context) ([]Member, error) {
	var c struct {
		Members []Member `json:"members"`
	}
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

// Bounds is the node's GET /api/bounds in milliseconds.
func (n *Node) Bounds(ctx context.Context) (map[string]float64, error) {
	var b map[string]any
	if _, err := n.get(ctx, "/api/bounds", &b); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for k, v := range b {
		if f, ok := v.(float64); ok {
			out[k] = f
		}
	}
	return out, nil
}

// Route is GET /api/route/{user}: the node of each online device, or an
// error for anything but 200 (503: unknown).
func (n *Node) Route(ctx context.Context, user string) ([]string, error) {
	var r struct {
		Devices []struct {
			Node string `json:"node"`
		} `json:"devices"`
	}
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

// readLog is a process node's log so far.
func readLog(dir, id string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, id+".log"))
	return string(b), err
}
