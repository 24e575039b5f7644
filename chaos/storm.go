package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
)

// StormReconnect is restart-storm's target: every device of a node that
// died is connected to another one within this long (the SDK tries the next
// URL at once, after a jittered back-off of at most 100 ms). A device whose
// lease or view lived on the dead node waits, in addition, for the failure
// detection: its handshake needs the lease and asks the view (the
// device limit, docs/protocol.md "Handshake"), both placed elsewhere only
// once the others declared the node dead.
const StormReconnect = time.Second

// sdkFleet is SDK devices r000... and one SDK watcher per node, each
// subscribed to every device's user, all online.
type sdkFleet struct {
	users    []string
	devices  []*client.Session
	watchers []*sdkWatcher
}

func (e *Env) startSDKFleet(ctx context.Context) (*sdkFleet, error) {
	f := &sdkFleet{}
	var watchers []string
	for i := range len(e.Fleet.Devices) {
		f.users = append(f.users, fmt.Sprintf("r%03d", i))
	}
	for i := range e.Cluster.Nodes {
		watchers = append(watchers, fmt.Sprintf("rwatch-%d", i))
	}
	for _, u := range f.users {
		if err := e.Cluster.Nodes[0].PutPolicy(ctx, u, `{"granularity":"exact","contacts":["`+joinQuoted(watchers)+`"]}`); err != nil {
			return nil, err
		}
	}
	var err error
	if f.devices, err = e.sessions(ctx, f.users); err != nil {
		return nil, err
	}
	ws, err := e.sessions(ctx, watchers)
	if err != nil {
		return nil, err
	}
	for _, s := range ws {
		s.Subscribe(f.users...)
		w := &sdkWatcher{s: s}
		go w.record()
		f.watchers = append(f.watchers, w)
	}
	e.sdk.Store(f)
	return f, allOnline(f.watchers, f.users, 30*time.Second)
}

// runStorm: kill -9 the node holding the most SDK devices (of three, a
// third: the round's in turn); each
// reconnects to another node within StormReconnect (plus the failure
// detection if its lease or view died too), is online again at every
// watcher (storm_online_again), devices elsewhere never show offline, and
// every watcher ends with every device online.
func runStorm(ctx context.Context, e *Env, r *Round) error {
	f, err := e.startSDKFleet(ctx)
	if err != nil {
		return err
	}
	time.Sleep(ms(e.Timing["settle_ms"]))
	victim, on := largest(e.Cluster.Nodes, f.devices, r.Index)
	lost, err := e.stormOwners(ctx, f, victim)
	if err != nil {
		return err
	}
	r.Victim, r.Fault = victim.ID, fmt.Sprintf("kill -9 %s with %d of %d SDK devices", victim.ID, len(on), len(f.devices))
	before := make([]int, len(f.devices))
	for i, d := range f.devices {
		before[i] = d.Connections()
	}
	t0 := time.Now()
	victim.Kill()
	fd := e.Timing["failure_detection_ms"]
	back := e.awaitReconnect(f, on, before, t0.Add(StormReconnect+ms(fd)+e.Slack))
	// Through the crash bounds, then the state everywhere (unknown, while a
	// moved view settles, is not offline).
	time.Sleep(time.Until(t0.Add(ms(max(e.Bounds["gateway_crash_ms"], e.Bounds["owner_crash_ms"])) + e.Slack)))
	for _, i := range on {
		d, ok := back[i]
		if !ok {
			r.find("no_reconnect", f.users[i], "", "not connected again within the failure detection + "+StormReconnect.String())
			continue
		}
		name, bound, again := "storm_reconnect", float64(StormReconnect.Milliseconds()), float64(StormReconnect.Milliseconds())
		if lost[f.users[i]] {
			name, bound, again = "storm_reconnect_owner_lost", bound+fd, e.Bounds["owner_crash_ms"]
		}
		r.Latencies = append(r.Latencies, Latency{Device: f.users[i], Bound: name, Ms: float64(d.Microseconds()) / 1000, BoundMs: bound})
		if at, ok := onlineAgain(f.watchers, f.users[i], t0); ok {
			r.Latencies = append(r.Latencies, Latency{Device: f.users[i], Bound: name + "_online", Ms: float64(max(at, d).Microseconds()) / 1000, BoundMs: again})
		}
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%d devices reconnected in %.0f ms (the last)", len(back), float64(maxDur(back).Microseconds())/1000))
	stayed := map[string]bool{}
	for i, u := range f.users {
		stayed[u] = !slices.Contains(on, i)
	}
	checkWatchers(r, f.watchers, t0, func(u string) bool { return stayed[u] }, "the storm, its node alive")
	if err := allOnline(f.watchers, f.users, 10*time.Second); err != nil {
		r.find("wrong_final", "", "", err.Error())
	}
	return nil
}

// largest is the node holding the most of devices (of those that tie, the
// round's in turn) and the indexes of its devices.
func largest(nodes []*Node, devices []*client.Session, round int) (*Node, []int) {
	on := map[string][]int{}
	most := 0
	for i, d := range devices {
		id := d.Hello().GetNode()
		on[id] = append(on[id], i)
		most = max(most, len(on[id]))
	}
	var tied []*Node
	for _, n := range nodes {
		if len(on[n.ID]) == most {
			tied = append(tied, n)
		}
	}
	victim := tied[round%len(tied)]
	return victim, on[victim.ID]
}

// stormOwners says, for each user of f, whether its lease or its view
// lives on victim.
func (e *Env) stormOwners(ctx context.Context, f *sdkFleet, victim *Node) (map[string]bool, error) {
	var leases []string
	for _, u := range f.users {
		leases = append(leases, u+"/phone")
	}
	byLease, err := ownersOf(ctx, e.survivor(victim), "lease", leases)
	if err != nil {
		return nil, err
	}
	byView, err := ownersOf(ctx, e.survivor(victim), "view", f.users)
	lost := map[string]bool{}
	for _, u := range f.users {
		lost[u] = byLease[u+"/phone"] == victim.ID || byView[u] == victim.ID
	}
	return lost, err
}

// onlineAgain is how long after t0 every watcher held user online again:
// the last event, at any watcher, that made it online after one that did
// not (unknown while a re-created view settles, offline); 0 for a user no
// watcher saw otherwise than online. false: a watcher does not hold it
// online at the end (wrong_final says so).
func onlineAgain(ws []*sdkWatcher, user string, t0 time.Time) (time.Duration, bool) {
	var at time.Duration
	for _, w := range ws {
		w.mu.Lock()
		online := true
		for _, ev := range w.events {
			if ev.Target != user || !ev.At.After(t0) {
				continue
			}
			if ev.Status == messages.Status_online && !online {
				at = max(at, ev.At.Sub(t0))
			}
			online = ev.Status == messages.Status_online
		}
		w.mu.Unlock()
		if !online {
			return 0, false
		}
	}
	return at, true
}

// awaitReconnect polls the devices on (indexes into f) until each has
// connected once more than before, or until deadline: how long after now
// each did.
func (e *Env) awaitReconnect(f *sdkFleet, on, before []int, deadline time.Time) map[int]time.Duration {
	t0 := time.Now()
	back := map[int]time.Duration{}
	for len(back) < len(on) && time.Now().Before(deadline) {
		for _, i := range on {
			if _, ok := back[i]; !ok && f.devices[i].Connections() > before[i] {
				back[i] = time.Since(t0)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return back
}

func maxDur(m map[int]time.Duration) time.Duration {
	var out time.Duration
	for _, d := range m {
		out = max(out, d)
	}
	return out
}
