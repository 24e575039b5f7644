package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds presenced once per test run.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	buildOnce.Do(func() {
		dir, err := filepathTemp()
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "presenced")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is one presenced process on free loopback ports.
type proc struct {
	t             *testing.T
	name          string
	listen, admin string
	gossip        string
	cmd           *exec.Cmd
	logs          *lockedBuffer
	done          chan error
	exited        bool
	token         string // the admin token, when started with one
}

func startProc(t *testing.T, name string, extra ...string) *proc {
	t.Helper()
	return startProcAt(t, &proc{name: name, listen: freePort(t), admin: freePort(t), gossip: freePort(t)}, extra...)
}

// startProcAt starts a process on at's name and addresses (a restart).
func startProcAt(t *testing.T, at *proc, extra ...string) *proc {
	t.Helper()
	name := at.name
	p := &proc{t: t, name: name, listen: at.listen, admin: at.admin, gossip: at.gossip, logs: &lockedBuffer{}, done: make(chan error, 1)}
	args := append([]string{"--timing", "fast", "--node-id", name, "--listen", p.listen, "--admin", p.admin, "--gossip", p.gossip,
		"--secret", "e2e", "--drain-spread", "200ms", "--log-level", "debug"}, extra...)
	if i := slices.Index(extra, "--admin-token"); i >= 0 && i+1 < len(extra) {
		p.token = extra[i+1]
	}
	p.cmd = exec.Command(binary(t), args...)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(p.kill)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, p.logs.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if res, err := http.Get("http://" + p.admin + "/readyz"); err == nil {
			res.Body.Close()
			return p
		}
		select {
		case err := <-p.done:
			p.exited = true
			t.Fatalf("%s exited: %v\n%s", name, err, p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready:\n%s", name, p.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill is kill -9.
func (p *proc) kill() {
	if p.exited {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.exited = true
}

func (p *proc) put(path, body string) {
	p.t.Helper()
	req, _ := http.NewRequest("PUT", "http://"+p.admin+path, strings.NewReader(body))
	p.authorize(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		p.t.Fatalf("PUT %s: %v %v", path, res, err)
	}
	res.Body.Close()
}

func (p *proc) dial(ctx context.Context, user, device string, attempt uint64) *client.Conn {
	p.t.Helper()
	tok, _ := gateway.Tokens{Key: []byte("e2e")}.Mint(user, device, time.Hour)
	c, err := client.Dial(ctx, "ws://"+p.listen+"/ws", client.DialOptions{Token: tok, Attempt: attempt})
	if err != nil {
		p.t.Fatalf("dial %s/%s on %s: %v", user, device, p.name, err)
	}
	p.t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// authorize adds the node's admin token, if it has one.
func (p *proc) authorize(req *http.Request) {
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
}

func filepathTemp() (string, error) { return os.MkdirTemp("", "presenced-bin-") }

// lockedBuffer is the process's stderr, read while exec still writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// bounds is the node's GET /api/bounds, the *_ms figures.
func (p *proc) bounds() map[string]int64 {
	p.t.Helper()
	var b map[string]any
	if code := p.getJSON("/api/bounds", &b); code != 200 {
		p.t.Fatalf("%s /api/bounds: %d", p.name, code)
	}
	out := map[string]int64{}
	for k, v := range b {
		if f, ok := v.(float64); ok {
			out[k] = int64(f)
		}
	}
	return out
}

// getJSON GETs an admin path and decodes a JSON answer into v: the status
// code, or 0 if the node did not answer.
func (p *proc) getJSON(path string, v any) int {
	req, _ := http.NewRequest("GET", "http://"+p.admin+path, nil)
	p.authorize(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	_ = json.NewDecoder(res.Body).Decode(v)
	return res.StatusCode
}

// memberStates is how p sees the members: id -> state.
func (p *proc) memberStates() map[string]string {
	var c struct {
		Members []struct{ ID, State string } `json:"members"`
	}
	p.getJSON("/api/cluster", &c)
	out := map[string]string{}
	for _, m := range c.Members {
		out[m.ID] = m.State
	}
	return out
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// keepAlive heartbeats c every 100 ms (fast preset: 300 ms) until ctx ends.
func keepAlive(ctx context.Context, c *client.Conn) {
	go func() {
		for seq := uint64(1); ctx.Err() == nil; seq++ {
			if c.Heartbeat(ctx, seq) != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

// subscribe asks for targets and returns the snapshot.
func subscribe(ctx context.Context, t *testing.T, c *client.Conn, targets ...string) *messages.Snapshot {
	t.Helper()
	if err := c.Subscribe(ctx, "s1", targets...); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s := f.GetSnapshot(); s != nil {
			return s
		}
	}
}

// converged waits until every node sees all of nodes alive: a cluster that
// just formed, before the test's devices connect.
func converged(t *testing.T, nodes ...*proc) {
	t.Helper()
	for _, p := range nodes {
		waitFor(t, 10*time.Second, fmt.Sprintf("%s sees %d members alive", p.name, len(nodes)), func() bool {
			alive := 0
			for _, st := range p.memberStates() {
				if st == "alive" {
					alive++
				}
			}
			return alive == len(nodes)
		})
	}
}

// waitOnline waits until p's admin API reports every user online: a device
// is online once its lease told the user's view, which may be after its
// hello, on another node.
func (p *proc) waitOnline(users ...string) {
	p.t.Helper()
	for _, u := range users {
		waitFor(p.t, 10*time.Second, p.name+": "+u+" online", func() bool {
			var st struct {
				Status string `json:"status"`
			}
			p.getJSON("/api/presence/"+u, &st)
			return st.Status == "online"
		})
	}
}

// settled waits out p's settle window (GET /api/bounds timing.settle_ms):
// views activated within it after a membership change answer unknown until
// it ends, as a just-formed cluster's do.
func (p *proc) settled() {
	p.t.Helper()
	var b struct {
		Timing struct {
			SettleMs int64 `json:"settle_ms"`
		} `json:"timing"`
	}
	if code := p.getJSON("/api/bounds", &b); code != 200 || b.Timing.SettleMs <= 0 {
		p.t.Fatalf("settle_ms from /api/bounds: %d %+v", code, b)
	}
	time.Sleep(time.Duration(b.Timing.SettleMs) * time.Millisecond)
}

// startCluster starts n nodes n1..nN sharing one SQLite store, the others
// joining n1, and waits until every one sees all of them alive. It returns
// the nodes and the store's DSN (for a node started later).
func startCluster(t *testing.T, n int) ([]*proc, string) {
	t.Helper()
	db := "sqlite:" + filepath.Join(t.TempDir(), "presence.db")
	nodes := []*proc{startProc(t, "n1", "--policy-dsn", db)}
	for i := 2; i <= n; i++ {
		nodes = append(nodes, startProc(t, fmt.Sprintf("n%d", i), "--policy-dsn", db, "--join", nodes[0].gossip))
	}
	converged(t, nodes...)
	return nodes, db
}
