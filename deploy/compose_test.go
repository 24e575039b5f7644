//go:build compose

package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/presence-im/presence/store/postgres"
)

// stack is one compose project brought up by a test.
type stack struct {
	t                *testing.T
	project, envFile string
	token, secret    string
	pgPassword       string
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// up builds presence-postgres:dev (postgres/build.sh, from the host's
// Debian PostgreSQL: this machine pulls no image) and starts every service
// of compose.yaml under a project name of its own, with fresh secrets and
// the fast timings. Published ports are random (127.0.0.1 only); the test
// reaches the containers at their addresses on the project's network.
// Cleanup takes everything down, whatever happened.
func up(t *testing.T) *stack {
	if out, err := run("sh", "postgres/build.sh"); err != nil {
		t.Fatalf("the PostgreSQL image: %v", err)
	} else {
		t.Log(out)
	}
	s := &stack{t: t, project: "presence-deploy-test-" + randHex(4), token: randHex(12), secret: randHex(12), pgPassword: randHex(12)}
	s.envFile = filepath.Join(t.TempDir(), "env")
	env := strings.Join([]string{"PRESENCE_TIMING=fast", "PRESENCE_SECRET=" + s.secret, "PRESENCE_ADMIN_TOKEN=" + s.token,
		"PRESENCE_CLUSTER_KEY=" + randHex(16), "POSTGRES_PASSWORD=" + s.pgPassword,
		"DEMO_DEVICES=6", "NODE1_WS=", "NODE1_ADMIN=", "NODE2_WS=", "NODE2_ADMIN=", "NODE3_WS=", "NODE3_ADMIN="}, "\n")
	if err := os.WriteFile(s.envFile, []byte(env+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.down)
	start := time.Now()
	s.compose("up", "-d")
	t.Logf("up: %v", time.Since(start).Round(time.Millisecond))
	return s
}

func (s *stack) compose(args ...string) string {
	s.t.Helper()
	out, err := run("docker-compose", append([]string{"-p", s.project, "-f", "compose.yaml", "--env-file", s.envFile}, args...)...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

func run(name string, args ...string) (string, error) {
	var out, errs bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, errs.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// down removes the project and checks nothing of it is left: no
// container, network or volume carries its label.
func (s *stack) down() {
	if s.t.Failed() {
		logs, _ := run("docker-compose", "-p", s.project, "-f", "compose.yaml", "--env-file", s.envFile, "logs", "--no-color", "--tail", "40")
		s.t.Logf("logs:\n%s", logs)
	}
	start := time.Now()
	if _, err := run("docker-compose", "-p", s.project, "-f", "compose.yaml", "--env-file", s.envFile, "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
		s.t.Error(err)
	}
	s.t.Logf("down: %v", time.Since(start).Round(time.Millisecond))
	label := "label=com.docker.compose.project=" + s.project
	for _, what := range [][]string{{"ps", "-a", "-q"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
		if left, err := run("docker", append(what, "--filter", label)...); err != nil || left != "" {
			s.t.Errorf("docker %s: left behind %q (%v)", what[0], left, err)
		}
	}
}

// container is one service's container: its id, its address on the
// project's network and the type of each of its mounts.
type container struct{ id, ip, mounts string }

// containers inspects every container of the project at once (each
// docker-compose call costs a second or two on a loaded machine).
func (s *stack) containers() map[string]container {
	ids := strings.Fields(s.compose("ps", "-q"))
	out, err := run("docker", append([]string{"inspect", "-f",
		`{{index .Config.Labels "com.docker.compose.service"}}|{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}|{{.Id}}|{{range .Mounts}} {{.Type}}{{end}}`}, ids...)...)
	if err != nil {
		s.t.Fatal(err)
	}
	cs := map[string]container{}
	for _, line := range strings.Split(out, "\n") {
		// service|address|id| mount types (no address between restarts)
		f := strings.Split(line, "|")
		if len(f) != 4 {
			s.t.Fatalf("docker inspect: %q", line)
		}
		cs[f[0]] = container{id: f[2], ip: f[1], mounts: strings.TrimSpace(f[3])}
	}
	for _, service := range []string{"node1", "node2", "node3", "postgres"} {
		if cs[service].ip == "" {
			s.t.Fatalf("no address of %s in %q", service, out)
		}
	}
	return cs
}

func (s *stack) admin(method, ip, path, body string) (int, []byte) {
	req, _ := http.NewRequest(method, "http://"+ip+":7700"+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err != nil {
		return 0, nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
}

// cluster is what a node's /api/cluster says: members alive and the
// devices connected to every node.
func (s *stack) cluster(ip string) (alive, devices int) {
	code, b := s.admin("GET", ip, "/api/cluster", "")
	var c struct {
		Members []struct{ State string }  `json:"members"`
		Actors  map[string]map[string]int `json:"actors"`
	}
	if code != 200 || json.Unmarshal(b, &c) != nil {
		return 0, 0
	}
	for _, m := range c.Members {
		if m.State == "alive" {
			alive++
		}
	}
	for _, a := range c.Actors {
		devices += a["connection"]
	}
	return alive, devices
}

// The compose cluster with PostgreSQL: every node ready and seeing the
// three, the demo's devices connected, nothing of the host mounted, a
// policy written through node1 read through node3 and found in
// PostgreSQL, a device online through node1 seen by a subscriber on node3;
// node1 killed: the device reconnects through node2 and the subscriber
// still sees it online; down leaves nothing behind.
func TestCompose(t *testing.T) {
	s := up(t)
	cs := s.containers()
	onlyNamedVolumes(t, cs)
	ips := map[string]string{}
	for _, n := range []string{"node1", "node2", "node3"} {
		ips[n] = cs[n].ip
		waitFor(t, 90*time.Second, n+" ready and seeing 3 members", func() bool {
			alive, _ := s.cluster(ips[n])
			return alive == 3
		})
	}
	waitFor(t, 30*time.Second, "the demo's devices connected", func() bool { _, d := s.cluster(ips["node3"]); return d >= 3 })
	s.sharedPolicy(ips, cs["postgres"].ip)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws := func(n string) string { return "ws://" + ips[n] + ":7600/ws" }
	ann := client.Start(ctx, client.Config{URLs: []string{ws("node1"), ws("node2")}, Token: s.mint("ann"),
		Log: slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	sam := client.Start(ctx, client.Config{URLs: []string{ws("node3")}, Token: s.mint("sam")})
	go func() {
		for range sam.Events() {
		}
	}()
	sam.Subscribe("ann")
	online := func() bool { p, ok := sam.State("ann"); return ok && p.GetStatus() == messages.Status_online }
	waitFor(t, 30*time.Second, "ann online through node1, seen from node3", func() bool {
		h := ann.Hello()
		return h != nil && h.GetNode() == "node1" && online()
	})
	if _, err := run("docker", "kill", "-s", "KILL", cs["node1"].id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "ann reconnected through node2", func() bool {
		h := ann.Hello()
		return h != nil && h.GetNode() == "node2"
	})
	waitFor(t, 30*time.Second, "node3 routes ann to node2", func() bool {
		code, b := s.admin("GET", ips["node3"], "/api/route/ann", "")
		return code == 200 && strings.Contains(string(b), `"node2"`)
	})
	if !online() {
		t.Fatal("sam does not see ann online after the failover")
	}
}

// sharedPolicy writes ann's policy through node1 and reads it back through
// node3 and straight from the PostgreSQL container: the nodes share that
// database (and not a file on the data volume). A wrong password is
// refused.
func (s *stack) sharedPolicy(ips map[string]string, pgIP string) {
	t := s.t
	if code, b := s.admin("PUT", ips["node1"], "/api/users/ann/policy", `{"granularity":"exact","contacts":["sam"]}`); code != 200 {
		t.Fatalf("policy: %d %s", code, b)
	}
	code, b := s.admin("GET", ips["node3"], "/api/users/ann/policy", "")
	var got store.PolicyDoc
	if code != 200 || json.Unmarshal(b, &got) != nil || got.Granularity != core.Exact || !slices.Equal(got.Contacts, []string{"sam"}) {
		t.Fatalf("ann's policy through node3: %d %s", code, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dsn := func(password string) string {
		return "postgres://presence:" + password + "@" + pgIP + ":5432/presence?sslmode=disable"
	}
	if db, err := postgres.Open(ctx, dsn("not-"+s.pgPassword)); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		if db != nil {
			db.Close()
		}
		t.Fatalf("PostgreSQL with a wrong password: %v", err)
	}
	db, err := postgres.Open(ctx, dsn(s.pgPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if doc, ok, err := db.Get(ctx, "ann"); err != nil || !ok || !slices.Equal(doc.Contacts, []string{"sam"}) {
		t.Fatalf("ann's policy in PostgreSQL: %+v %v %v", doc, ok, err)
	}
}

// onlyNamedVolumes: no container mounts a directory of the host, so
// nothing (root-owned) is written into the checkout; down removes the rest.
func onlyNamedVolumes(t *testing.T, cs map[string]container) {
	for service, c := range cs {
		if strings.Contains(c.mounts, "bind") {
			t.Errorf("%s mounts a host directory: %s", service, c.mounts)
		}
	}
}

func (s *stack) mint(user string) string {
	tok, err := gateway.Tokens{Key: []byte(s.secret)}.Mint(user, "phone", time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	return tok
}

// Without the secrets (an env file copied but not filled in), compose
// refuses to start and says where to set them.
func TestComposeNeedsSecrets(t *testing.T) {
	example, err := os.ReadFile("env.example")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(file, example, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = run("docker-compose", "-p", "presence-deploy-config-test", "-f", "compose.yaml", "--env-file", file, "config", "-q")
	if err == nil || !strings.Contains(err.Error(), "deploy/.env") {
		t.Fatalf("the example's empty secrets: %v", err)
	}
}

// The PostgreSQL image without a password refuses to initialize, names
// the variable, and leaves no container behind (--rm).
func TestPostgresImageNeedsPassword(t *testing.T) {
	if _, err := run("sh", "postgres/build.sh"); err != nil {
		t.Fatalf("the PostgreSQL image: %v", err)
	}
	name := "presence-deploy-test-pg-" + randHex(4)
	_, err := run("docker", "run", "--rm", "--name", name, "presence-postgres:dev")
	if err == nil || !strings.Contains(err.Error(), "POSTGRES_PASSWORD is not set") {
		t.Fatalf("no password: %v", err)
	}
	if left, _ := run("docker", "ps", "-a", "-q", "--filter", "name="+name); left != "" {
		t.Errorf("left behind: %s", left)
	}
}

// tlog writes the SDK's log into the test's.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) { w.t.Log(strings.TrimSpace(string(p))); return len(p), nil }
