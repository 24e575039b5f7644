package chaos

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Docker runs nodes as containers of Image (`make docker` builds
// presence:dev, FROM scratch) on a network of their own, created for the
// run and removed after it: each node gets the next address of its subnet,
// the harness reaches them there, and they share the store through a bind
// mount of the round's directory. Faults are docker kill -s KILL and
// docker pause / unpause (the cgroup freezer).
type Docker struct {
	Image string

	network string
	subnet  string // first three octets
	names   []string
	cut     []*Node // disconnected from the network
}

func docker(ctx context.Context, args ...string) (string, error) {
	var out, errs bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("chaos: docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errs.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// ensureNetwork creates the run's network on a free private subnet.
func (d *Docker) ensureNetwork(ctx context.Context) error {
	if d.network != "" {
		return nil
	}
	if _, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", d.Image); err != nil {
		return fmt.Errorf("chaos: image %s not found: `make docker` builds it (%w)", d.Image, err)
	}
	var last error
	for range 8 {
		// A name of its own each try: a network a failed round left
		// behind must not block the next.
		name := fmt.Sprintf("presence-chaos-%d-%d", os.Getpid(), rand.Uint32())
		subnet := fmt.Sprintf("172.%d.%d", 24+rand.IntN(8), rand.IntN(256))
		if _, err := docker(context.WithoutCancel(ctx), "network", "create", "--label", chaosLabel, "--subnet", subnet+".0/24", name); err != nil {
			last = err
			continue
		}
		d.network, d.subnet = name, subnet
		return nil
	}
	return last
}

// chaosLabel marks what the harness creates: `docker ps -a --filter
// label=presence-chaos` finds anything a killed run left behind.
const chaosLabel = "presence-chaos"

type container struct {
	name string
	dead bool
}

func (d *Docker) start(ctx context.Context, nd *Node, dir string, args []string) (runner, error) {
	if err := d.ensureNetwork(ctx); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	ip := fmt.Sprintf("%s.%d", d.subnet, 10+len(d.names))
	nd.Listen, nd.Admin, nd.Gossip = ip+":7600", ip+":7700", ip+":7946"
	c := &container{name: d.network + "-" + nd.ID}
	// Named before it exists: stop removes it whatever happens to the run
	// (the daemon starts it even if this command is interrupted).
	d.names = append(d.names, c.name)
	run := []string{"run", "-d", "--name", c.name, "--label", chaosLabel, "--network", d.network, "--ip", ip, "-v", abs + ":/data", d.Image}
	run = append(run, args...)
	// --insecure: the containers listen on a private bridge network that
	// only this harness reaches, and the harness is the client it must not
	// lock out (it has no admin token or cluster key to give).
	run = append(run, "--listen", "0.0.0.0:7600", "--admin", "0.0.0.0:7700", "--gossip", nd.Gossip, "--policy-dsn", "sqlite:/data/presence.db", "--insecure")
	if _, err := docker(context.WithoutCancel(ctx), run...); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *container) kill() {
	if !c.dead {
		_, _ = docker(context.Background(), "unpause", c.name) // a frozen container cannot die
		_, _ = docker(context.Background(), "kill", "-s", "KILL", c.name)
		_, _ = docker(context.Background(), "wait", c.name)
		c.dead = true
	}
}

func (c *container) terminate() error {
	_, err := docker(context.Background(), "kill", "-s", "TERM", c.name)
	return err
}

func (c *container) pause() error {
	_, err := docker(context.Background(), "pause", c.name)
	return err
}

func (c *container) resume() error {
	_, err := docker(context.Background(), "unpause", c.name)
	return err
}

func (c *container) quit() error {
	_, err := docker(context.Background(), "kill", "-s", "QUIT", c.name)
	return err
}

func (c *container) alive() bool {
	if c.dead {
		return false
	}
	out, err := docker(context.Background(), "inspect", "--format", "{{.State.Running}}", c.name)
	return err == nil && out == "true"
}

func (c *container) exitErr() error {
	out, _ := docker(context.Background(), "inspect", "--format", "{{.State.ExitCode}} {{.State.Error}}", c.name)
	return fmt.Errorf("container %s ended: %s", c.name, out)
}

func (c *container) collect(dir, id string) {
	_ = os.WriteFile(filepath.Join(dir, id+".log"), []byte(c.logs()), 0o644)
}

// disconnect cuts nd's container off the run's network (docker network
// disconnect): it reaches no other node, and the harness no longer reaches
// it either (its devices hear nothing, as behind a cut cable).
func (d *Docker) disconnect(nd *Node) error {
	c, ok := nd.run.(*container)
	if !ok {
		return fmt.Errorf("chaos: %s is not a container", nd.ID)
	}
	_, err := docker(context.Background(), "network", "disconnect", d.network, c.name)
	if err == nil {
		d.cut = append(d.cut, nd)
	}
	return err
}

// reconnect connects every container disconnect cut off again, at its
// own address.
func (d *Docker) reconnect() error {
	for len(d.cut) > 0 {
		nd := d.cut[0]
		ip, _, _ := strings.Cut(nd.Gossip, ":")
		if _, err := docker(context.Background(), "network", "connect", "--ip", ip, d.network, nd.run.(*container).name); err != nil {
			return err
		}
		d.cut = d.cut[1:]
	}
	return nil
}

// logs is what the container wrote so far (stdout and stderr).
func (c *container) logs() string {
	out, _ := exec.Command("docker", "logs", c.name).CombinedOutput()
	return string(out)
}

// stop removes the run's containers and network.
func (d *Docker) stop() {
	for _, n := range d.names {
		_, _ = docker(context.Background(), "rm", "-f", n)
	}
	d.names = nil
	if d.network != "" {
		_, _ = docker(context.Background(), "network", "rm", d.network)
		d.network = ""
	}
}
