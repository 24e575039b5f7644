package chaos

import (
	"context"
	"encoding/json"
	"errors"
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
	Bin    string // presenced binary
	Dir    string // store and node logs
	Preset string // timing preset, "fast" unless set
	Secret string // device-token key
	Nodes  []*Node

	seq int
}

// Node is one presenced process.
type Node struct {
	ID                    string
	Listen, Admin, Gossip string

	cmd  *exec.Cmd
	logs *os.File
	done chan struct{}
	mu   sync.Mutex
	err  error // the process's exit, once done
}

// Build compiles presenced into dir (from the module this runs in).
func Build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "presenced")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/presence-im/presence/cmd/presenced").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("chaos: building presenced: %w\n%s", err, out)
	}
	return bin, nil
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Start starts n nodes, the first starting the cluster and the others
// joining it, and waits until every node sees all of them alive.
func (c *Cluster) Start(ctx context.Context, n int) error {
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
	nd := &Node{ID: fmt.Sprintf("n%d", c.seq), done: make(chan struct{})}
	for _, p := range []*string{&nd.Listen, &nd.Admin, &nd.Gossip} {
		a, err := freePort()
		if err != nil {
			return nil, err
		}
		*p = a
	}
	preset := c.Preset
	if preset == "" {
		preset = "fast"
	}
	args := []string{"--timing", preset, "--node-id", nd.ID, "--listen", nd.Listen, "--admin", nd.Admin, "--gossip", nd.Gossip,
		"--secret", c.Secret, "--policy-dsn", "sqlite:" + filepath.Join(c.Dir, "presence.db")}
	for _, o := range c.Nodes {
		if o.Alive() {
			args = append(args, "--join", o.Gossip)
			break
		}
	}
	logs, err := os.Create(filepath.Join(c.Dir, nd.ID+".log"))
	if err != nil {
		return nil, err
	}
	nd.logs = logs
	nd.cmd = exec.Command(c.Bin, args...)
	nd.cmd.Stdout, nd.cmd.Stderr = logs, logs
	if err := nd.cmd.Start(); err != nil {
		logs.Close()
		return nil, fmt.Errorf("chaos: starting %s: %w", nd.ID, err)
	}
	go func() {
		err := nd.cmd.Wait()
		nd.mu.Lock()
		nd.err = err
		nd.mu.Unlock()
		logs.Close()
		close(nd.done)
	}()
	c.Nodes = append(c.Nodes, nd)
	if err := nd.WaitReady(ctx, 20*time.Second); err != nil {
		return nil, err
	}
	return nd, nil
}

// Alive reports whether the process is still running.
func (n *Node) Alive() bool {
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// WaitReady waits until GET /readyz answers 200.
func (n *Node) WaitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		if code, _ := n.get(ctx, "/readyz", nil); code == 200 {
			return nil
		}
		if !n.Alive() {
			return fmt.Errorf("chaos: %s exited: %v", n.ID, n.err)
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

// Signal sends sig to the node's process.
func (n *Node) Signal(sig syscall.Signal) error { return n.cmd.Process.Signal(sig) }

// Kill is kill -9; it waits for the process to end.
func (n *Node) Kill() {
	if n.Alive() {
		_ = n.cmd.Process.Signal(syscall.SIGKILL)
		<-n.done
	}
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		_ = n.cmd.Process.Signal(syscall.SIGCONT) // a stopped process cannot die
		n.Kill()
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

// Log is what the node wrote so far.
func (n *Node) Log(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, n.ID+".log"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err.Error()
	}
	return string(b)
}
