package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// A real network partition on the process backend. Every node listens on
// a loopback address of its own (127.77.P.i) and runs with a group id of
// its own, and the firewall drops packets in an iptables chain of this
// run's own (PRESENCE-CHAOS-<pid>), jumped to from OUTPUT and removed at
// the end; a run killed before its end leaves it, and the next run
// removes it (removeStale). Addresses alone cannot tell the nodes' packets
// apart: Linux sends every connection to a 127/8 address from 127.0.0.1,
// so the rules match the sending process's group (iptables owner match):
// an isolated node may only answer on its device and admin ports (the
// harness's devices and watchers, group 0, reach every node), and the
// others' packets to its address are dropped.

// isolation is the loopback address and group id of the seq-th node of
// this run.
func isolation(seq int) (string, int) {
	pid := os.Getpid()
	return fmt.Sprintf("127.77.%d.%d", pid%250+1, seq), 50000 + (pid%1000)*10 + seq
}

// firewall is this run's iptables chain.
type firewall struct {
	chain string
	marks *marks // its cluster's: partitions and heals
}

func iptables(args ...string) error {
	if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: iptables %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// chainPrefix names a run's chain, followed by its process id.
const chainPrefix = "PRESENCE-CHAOS-"

// ownChain is whether this process has a firewall that was not removed:
// then the chain of its pid is live, not stale (removeStale).
var ownChain atomic.Bool

// ownChainName is this process's chain.
func ownChainName() string { return fmt.Sprintf("%s%d", chainPrefix, os.Getpid()) }

func newFirewall() (*firewall, error) {
	removeStale()
	f := &firewall{chain: ownChainName()}
	if err := iptables("-N", f.chain); err != nil {
		return nil, err
	}
	if err := iptables("-I", "OUTPUT", "1", "-j", f.chain); err != nil {
		_ = iptables("-X", f.chain)
		return nil, err
	}
	ownChain.Store(true)
	return f, nil
}

// isolate cuts n off from others.
func (f *firewall) isolate(n *Node, others []*Node) error {
	f.marks.add(n.ID, "partition")
	host, _, _ := net.SplitHostPort(n.Gossip)
	_, listen, _ := net.SplitHostPort(n.Listen)
	_, admin, _ := net.SplitHostPort(n.Admin)
	gid := func(n *Node) string { return fmt.Sprint(n.gid) }
	rules := [][]string{
		{"-m", "owner", "--gid-owner", gid(n), "-p", "udp", "-j", "DROP"},
		{"-m", "owner", "--gid-owner", gid(n), "-p", "tcp", "-m", "multiport", "!", "--sports", listen + "," + admin, "-j", "DROP"},
	}
	for _, o := range others {
		rules = append(rules, []string{"-m", "owner", "--gid-owner", gid(o), "-d", host, "-j", "DROP"})
	}
	for _, r := range rules {
		if err := iptables(append([]string{"-A", f.chain}, r...)...); err != nil {
			return err
		}
	}
	return nil
}

// split cuts the nodes into sides: every packet of a node's process to
// the address of a node on another side is dropped. (An answer on a
// connection the other side opened goes to 127.0.0.1, not to its address,
// but that connection's own packets are dropped, so nothing passes.)
func (f *firewall) split(sides [][]*Node) error {
	for i, side := range sides {
		for j, other := range sides {
			if i == j {
				continue
			}
			for _, n := range side {
				for _, o := range other {
					host, _, _ := net.SplitHostPort(o.Gossip)
					if err := iptables("-A", f.chain, "-m", "owner", "--gid-owner", fmt.Sprint(n.gid), "-d", host, "-j", "DROP"); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// heal drops every rule: the partition ends.
func (f *firewall) heal() error { f.marks.add("", "heal"); return iptables("-F", f.chain) }

// remove takes the chain away for good.
func (f *firewall) remove() {
	_ = iptables("-D", "OUTPUT", "-j", f.chain)
	_ = iptables("-F", f.chain)
	_ = iptables("-X", f.chain)
	if f.chain == ownChainName() {
		ownChain.Store(false)
	}
}

// removeStale removes the chains of earlier runs whose process is gone (a
// harness killed with SIGKILL never removed its own) or that carry this
// process's id while it has no firewall of its own (a reused pid): their
// rules would drop this run's packets where its addresses and groups
// repeat theirs (isolation), and the chain of our own id could not be
// created. A process is looked for in this PID namespace: a harness in a
// container sharing this network namespace but not its PIDs would look
// gone (the project's own runs do not do that).
func removeStale() {
	out, err := exec.Command("iptables", "-S").Output()
	if err != nil {
		return // newFirewall's own call says why
	}
	for _, line := range strings.Split(string(out), "\n") {
		id, ok := strings.CutPrefix(line, "-N "+chainPrefix)
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(id)
		if err != nil {
			continue
		}
		if own := pid == os.Getpid(); own && !ownChain.Load() || !own && !alive(pid) {
			(&firewall{chain: chainPrefix + id}).remove()
		}
	}
}

// alive reports whether a process of that id exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// isolate cuts n off from the others: the firewall on the process backend
// (run as root), docker network disconnect on containers.
func (c *Cluster) isolate(n *Node, others []*Node) error {
	switch {
	case c.Docker != nil:
		return c.Docker.disconnect(n)
	case c.fw != nil:
		return c.fw.isolate(n, others)
	}
	return errors.New("chaos: a partition needs the process backend run as root (iptables) or the docker backend")
}

// heal ends the partition.
func (c *Cluster) heal() error {
	if c.Docker != nil {
		return c.Docker.reconnect()
	}
	return c.fw.heal()
}

// runPartition: 2+1 (the round's victim alone). The majority serves on and
// reports the victim's devices offline; the victim fences (its devices get
// 1001) and they reconnect to the majority; after the heal the victim
// rejoins, and every watcher, its own reconnected, holds the truth.
func runPartition(ctx context.Context, e *Env, r *Round) error {
	if len(e.groups) > 0 {
		return runSplit(ctx, e, r)
	}
	victim := e.Cluster.Nodes[r.Index%len(e.Cluster.Nodes)]
	var majority []*Node
	for _, n := range e.Cluster.Nodes {
		if n != victim {
			majority = append(majority, n)
		}
	}
	owners, err := e.owners(ctx, majority[0])
	if err != nil {
		return err
	}
	ds := e.devicesOn(victim)
	r.Victim, r.Fault = victim.ID, fmt.Sprintf("partition %s (%d devices) from the other %d", victim.ID, len(ds), len(majority))
	t0 := time.Now()
	if err := e.Cluster.isolate(victim, majority); err != nil {
		return err
	}
	ws := e.watchersBut(victim)
	deadline := t0.Add(ms(max(e.Bounds["gateway_crash_ms"], e.Bounds["owner_crash_ms"])) + e.Slack)
	e.awaitOffline(r, ws, ds, func(*Device) time.Time { return t0 }, e.crashBound(owners, victim), deadline)
	if e.Cluster.Docker == nil { // a container cut off closes nothing the harness hears
		e.awaitFence(r, victim, ds, t0, 1)
	}
	for i, d := range ds { // what the SDK does: reconnect elsewhere
		d.Node = majority[i%len(majority)]
		if err := e.Fleet.Connect(ctx, d); err != nil {
			r.find("no_reconnect", d.User, "", err.Error())
		}
	}
	time.Sleep(time.Until(deadline))
	e.checkStayed(r, ws, e.othersThan(ds), t0)
	if e.Cluster.Docker == nil {
		e.awaitIncarnations(ctx, []*Node{victim})
	}
	if err := e.Cluster.heal(); err != nil {
		return err
	}
	healed := time.Now()
	if e.Cluster.Docker == nil { // a container rejoins at its old address, not as a fenced incarnation
		e.awaitHealConvergence(ctx, r, t0, healed)
	}
	if !e.awaitRejoin(ctx, r, victim) {
		return nil
	}
	if e.Cluster.Docker != nil {
		e.fencedByLog(r, victim, t0)
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%s rejoined %.1f s after the heal", victim.ID, time.Since(healed).Seconds()))
	time.Sleep(ms(e.Timing["settle_ms"]))
	return e.afterRejoin(ctx, r, victim)
}

// fencedByLog records when victim fenced after t0, by the time of its
// log line (the harness could not reach it meanwhile), against the failure
// detection.
func (e *Env) fencedByLog(r *Round, victim *Node, t0 time.Time) {
	for _, line := range strings.Split(victim.Log(), "\n") {
		if !strings.Contains(line, `msg="fenced: closing devices`) {
			continue
		}
		stamp, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err == nil && at.After(t0) {
			r.Latencies = append(r.Latencies, Latency{Device: victim.ID, Bound: "fence", Ms: float64(at.Sub(t0).Microseconds()) / 1000,
				BoundMs: e.fenceBound(1)})
			return
		}
	}
	r.find("not_fenced", "", "", victim.ID+" logged no fence after the partition")
}

// awaitFence records how long after t0 each of ds was closed with 1001 by
// the fencing victim, on a side of side nodes, against fenceBound.
func (e *Env) awaitFence(r *Round, victim *Node, ds []*Device, t0 time.Time, side int) {
	bound := e.fenceBound(side)
	deadline := t0.Add(ms(bound) + e.Slack)
	for _, d := range ds {
		for time.Now().Before(deadline) && d.CloseCode() == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		if code := d.CloseCode(); code != 1001 {
			r.find("not_fenced", d.User, "", fmt.Sprintf("connection to %s: close %d, want 1001", victim.ID, code))
			continue
		}
		r.Latencies = append(r.Latencies, Latency{Device: d.User, Bound: "fence", Ms: float64(d.ClosedAt().Sub(t0).Microseconds()) / 1000, BoundMs: bound})
	}
}

// leaseStrategy reports whether the nodes run --split-brain lease.
func (e *Env) leaseStrategy() bool { return slices.Contains(e.Cluster.Args, "lease") }

// afterRejoin: the victim's watcher, reconnected, and every other one hold
// the truth (all devices online), and a departure on each node reaches all
// of them within the graceful bound: one cluster again.
func (e *Env) afterRejoin(ctx context.Context, r *Round, victim *Node) error {
	var targets []string
	for _, d := range e.Fleet.Devices {
		targets = append(targets, d.User)
	}
	old := e.watcherOn(victim)
	w := &Watcher{User: old.User, Node: victim}
	if err := e.Fleet.Watch(ctx, w, targets); err != nil {
		r.find("no_rejoin", "", w.User, err.Error())
		return nil
	}
	ws := append(e.watchersBut(victim), w)
	e.checkFinal(r, ws, nil, e.Fleet.Devices)
	gone := e.closeOnePerNode(r, ws)
	e.checkFinal(r, ws, gone, e.othersThan(gone))
	e.checkRoutes(ctx, r, victim, gone, e.othersThan(gone))
	return nil
}
