package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/chaos"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/internal/poll"
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
		dir, err := os.MkdirTemp("", "presenced-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath, buildErr = chaos.Build(context.Background(), dir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is one presenced process on free loopback ports, run by the chaos
// harness (chaos.Cluster): the tests and the chaos scenarios start nodes
// the same way.
type proc struct {
	t             *testing.T
	node          *chaos.Node
	name          string
	listen, admin string
	gossip        string
	cluster       *chaos.Cluster // its own: each test node names its seeds
}

// startProc starts a node named name with extra flags; it is killed (and
// its log shown if the test failed) at the end of the test.
func startProc(t *testing.T, name string, extra ...string) *proc {
	t.Helper()
	c := &chaos.Cluster{Bin: binary(t), Dir: t.TempDir(), Secret: "e2e", NoKey: true, Args: []string{"--drain-spread", "200ms", "--log-level", "debug"}}
	t.Cleanup(c.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := c.StartNode(ctx, name, extra...)
	if err != nil {
		log := ""
		if n != nil {
			log = n.Log()
		}
		t.Fatalf("%s: %v\n%s", name, err, log)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s's log, proto.actor's and memberlist's debug lines left out:\n%s", name, ownLines(n.Log()))
		}
	})
	return &proc{t: t, node: n, cluster: c, name: name, listen: n.Listen, admin: n.Admin, gossip: n.Gossip}
}

// startProcAt starts p, which has ended, again on its name and addresses
// with extra flags (a restart).
func startProcAt(t *testing.T, p *proc, extra ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.cluster.StartAgain(ctx, p.node, extra...); err != nil {
		t.Fatalf("%s: %v\n%s", p.name, err, p.log())
	}
	return p
}

// ownLines is a node's log without the libraries' debug lines, which
// outnumber the node's own by far: a failure's output stays short enough
// to be read whole where CI keeps only part of it.
func ownLines(log string) string {
	var b strings.Builder
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=DEBUG") && (strings.Contains(l, "lib=protoactor") || strings.Contains(l, "lib=memberlist")) {
			continue
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// log is what the node logged so far.
func (p *proc) log() string { return p.node.Log() }

// kill is kill -9.
func (p *proc) kill() { p.node.Kill() }

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

// allow sets user's policy through p's admin API: exact presence for the
// contacts.
func (p *proc) allow(user string, contacts ...string) {
	p.t.Helper()
	b, err := json.Marshal(map[string]any{"granularity": "exact", "contacts": contacts})
	if err != nil {
		p.t.Fatal(err)
	}
	p.put("/api/users/"+user+"/policy", string(b))
}

// dialAlive is dial with heartbeats until ctx ends, so the connection
// outlives the stale threshold.
func (p *proc) dialAlive(ctx context.Context, user, device string, attempt uint64) *client.Conn {
	p.t.Helper()
	c := p.dial(ctx, user, device, attempt)
	keepAlive(ctx, c)
	return c
}

// authorize adds the node's admin token, if it has one.
func (p *proc) authorize(req *http.Request) {
	if p.node.Token != "" {
		req.Header.Set("Authorization", "Bearer "+p.node.Token)
	}
}

// bounds is the node's GET /api/bounds.
func (p *proc) bounds() admin.Bounds {
	p.t.Helper()
	var b admin.Bounds
	if code := p.getJSON("/api/bounds", &b); code != 200 {
		p.t.Fatalf("%s /api/bounds: %d", p.name, code)
	}
	return b
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
	var c admin.Cluster
	p.getJSON("/api/cluster", &c)
	out := map[string]string{}
	for _, m := range c.Members {
		out[m.ID] = string(m.State)
	}
	return out
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, within, 20*time.Millisecond, what, cond)
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
// the nodes and the store's DSN (for a node started later). Every node
// gets the extra flags.
func startCluster(t *testing.T, n int, extra ...string) ([]*proc, string) {
	t.Helper()
	db := sqliteDSN(t)
	nodes := []*proc{startProc(t, "n1", append([]string{"--policy-dsn", db}, extra...)...)}
	for i := 2; i <= n; i++ {
		nodes = append(nodes, startProc(t, fmt.Sprintf("n%d", i), append([]string{"--policy-dsn", db, "--join", nodes[0].gossip}, extra...)...))
	}
	converged(t, nodes...)
	return nodes, db
}

// samAndTwo starts three nodes with sam on n1, a on n2 and b on n3 (who
// let sam see them), all connected and heartbeating, and waits until n1
// sees a and b online.
func samAndTwo(ctx context.Context, t *testing.T, a, b string) (nodes []*proc, sam, ca, cb *client.Conn) {
	t.Helper()
	nodes, _ = startCluster(t, 3)
	nodes[0].allow(a, "sam")
	nodes[0].allow(b, "sam")
	sam = nodes[0].dialAlive(ctx, "sam", "phone", 1)
	ca = nodes[1].dialAlive(ctx, a, "phone", 1)
	cb = nodes[2].dialAlive(ctx, b, "phone", 1)
	nodes[0].waitOnline(a, b)
	return nodes, sam, ca, cb
}

// sqliteDSN is a --policy-dsn for a fresh SQLite file of the test's own.
func sqliteDSN(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "presence.db") }

// freePort is a loopback address that was free a moment ago.
func freePort(t *testing.T) string {
	// Free on every address (chaos.FreePort: below the ephemeral range,
	// TCP and UDP): a port free on 127.0.0.1 may be another loopback
	// address's (a load process's on 127.0.0.2), and a node binding
	// 0.0.0.0 would find it taken.
	a, err := chaos.FreePort("0.0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(a)
	return net.JoinHostPort("127.0.0.1", port)
}
