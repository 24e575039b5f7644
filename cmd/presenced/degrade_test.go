package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
)

// wireDevice is a raw device that records every frame as it arrives and
// follows degraded mode as the SDKs do (client/degraded.go): on degraded
// it queries the targets every retry_after_ms, waiting out a 429; on
// restored it stops, and the snapshot with request_id "restored" replaces
// them. It checks each target's versions on the wire, before any filter:
// a snapshot or query answer never below the highest received, a push
// (presence, presence_batch) always above it.
type wireDevice struct {
	name string
	c    *client.Conn

	mu        sync.Mutex
	frames    []wireFrame
	held      map[string]*messages.Presence
	highest   map[string]uint64
	back      []string // versions that went back
	pulling   map[string]bool
	restoring []string
	stopPull  context.CancelFunc
	notBefore time.Time
	queries   int
}

// wireFrame is one frame received: its kind ("presence", "presence_batch",
// "snapshot:ID", "degraded", "restored", "error:CODE") and presences.
type wireFrame struct {
	kind      string
	presences []*messages.Presence
	targets   []string // a degraded frame's
}

func dialWire(ctx context.Context, t *testing.T, p *proc, user string) *wireDevice {
	t.Helper()
	d := &wireDevice{name: user + "@" + p.name, c: p.dialAlive(ctx, user, "phone", 1),
		held: map[string]*messages.Presence{}, highest: map[string]uint64{}}
	go d.read(ctx)
	return d
}

func (d *wireDevice) read(ctx context.Context) {
	for {
		f, err := d.c.Next(ctx)
		if err != nil {
			d.mu.Lock()
			if d.stopPull != nil {
				d.stopPull()
			}
			d.mu.Unlock()
			return
		}
		d.mu.Lock()
		d.take(ctx, f)
		d.mu.Unlock()
	}
}

// take records f and acts on it; d.mu held.
func (d *wireDevice) take(ctx context.Context, f *messages.Frame) {
	switch k := f.GetKind().(type) {
	case *messages.Frame_Presence:
		d.frames = append(d.frames, wireFrame{kind: "presence", presences: []*messages.Presence{k.Presence}})
		d.change(k.Presence, true)
	case *messages.Frame_PresenceBatch:
		d.frames = append(d.frames, wireFrame{kind: "presence_batch", presences: k.PresenceBatch.GetPresences()})
		for _, p := range k.PresenceBatch.GetPresences() {
			d.change(p, true)
		}
	case *messages.Frame_Snapshot:
		d.frames = append(d.frames, wireFrame{kind: "snapshot:" + k.Snapshot.GetRequestId(), presences: k.Snapshot.GetPresences()})
		d.snapshot(k.Snapshot)
	case *messages.Frame_Degraded:
		d.frames = append(d.frames, wireFrame{kind: "degraded", targets: k.Degraded.GetTargets()})
		d.degraded(ctx, k.Degraded)
	case *messages.Frame_Restored:
		d.frames = append(d.frames, wireFrame{kind: "restored"})
		d.restoring = slices.Sorted(maps.Keys(d.pulling))
		if d.stopPull != nil {
			d.stopPull()
		}
		d.stopPull, d.pulling = nil, nil
	case *messages.Frame_Error:
		d.frames = append(d.frames, wireFrame{kind: fmt.Sprintf("error:%d", k.Error.GetCode())})
		if ms := k.Error.GetRetryAfterMs(); ms > 0 {
			d.notBefore = time.Now().Add(time.Duration(ms) * time.Millisecond)
		}
	}
}

// check notes a version below the highest received for its target, or
// for a push (strict) not above it; d.mu held.
func (d *wireDevice) check(p *messages.Presence, push bool) {
	h, seen := d.highest[p.GetUser()]
	if seen && (p.GetVersion() < h || push && p.GetVersion() == h) {
		d.back = append(d.back, fmt.Sprintf("%s: %d after %d (push %v)", p.GetUser(), p.GetVersion(), h, push))
	}
	d.highest[p.GetUser()] = max(h, p.GetVersion())
}

// change keeps p if newer than what is held; d.mu held.
func (d *wireDevice) change(p *messages.Presence, push bool) {
	d.check(p, push)
	if old := d.held[p.GetUser()]; old == nil || p.GetVersion() > old.GetVersion() {
		d.held[p.GetUser()] = p
	}
}

// snapshot: a query's answer is taken as changes; a subscribe's replaces
// every target, the restored one the targets pulled; d.mu held.
func (d *wireDevice) snapshot(s *messages.Snapshot) {
	if strings.HasPrefix(s.GetRequestId(), "q") {
		for _, p := range s.GetPresences() {
			d.change(p, false)
		}
		return
	}
	if s.GetRequestId() == core.RestoredID {
		for _, t := range d.restoring {
			delete(d.held, t)
		}
		d.restoring = nil
	}
	for _, p := range s.GetPresences() {
		d.check(p, false)
		d.held[p.GetUser()] = p
	}
}

// degraded starts the pull loop; d.mu held.
func (d *wireDevice) degraded(ctx context.Context, m *messages.Degraded) {
	if d.pulling == nil {
		d.pulling = map[string]bool{}
	}
	for _, t := range m.GetTargets() {
		d.pulling[t] = true
	}
	if d.stopPull == nil {
		var pctx context.Context
		pctx, d.stopPull = context.WithCancel(ctx)
		go d.pull(ctx, pctx, time.Duration(m.GetRetryAfterMs())*time.Millisecond)
	}
}

// pull queries the degraded targets every pace until pctx ends, writing
// with ctx (a write whose context ends closes the socket).
func (d *wireDevice) pull(ctx, pctx context.Context, pace time.Duration) {
	for {
		select {
		case <-pctx.Done():
			return
		case <-time.After(pace):
		}
		d.mu.Lock()
		if time.Now().Before(d.notBefore) || len(d.pulling) == 0 {
			d.mu.Unlock()
			continue
		}
		d.queries++
		id, targets := fmt.Sprintf("q%d", d.queries), slices.Sorted(maps.Keys(d.pulling))
		d.mu.Unlock()
		_ = d.c.Query(ctx, id, targets...)
	}
}

// status is what d holds of target (0: nothing).
func (d *wireDevice) status(target string) messages.Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held[target].GetStatus()
}

// saw reports whether d received a frame of kind.
func (d *wireDevice) saw(kind string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.ContainsFunc(d.frames, func(f wireFrame) bool { return f.kind == kind })
}

// pulledDuringDegraded checks d's frames in order: a degraded frame naming
// targets, then a query answer holding target with status before any
// restored, then restored, then the snapshot "restored".
func (d *wireDevice) pulledDuringDegraded(targets []string, target string, status messages.Status) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	step := 0
	for _, f := range d.frames {
		switch {
		case step == 0 && f.kind == "degraded" && slices.Equal(f.targets, targets):
			step = 1
		case step == 1 && strings.HasPrefix(f.kind, "snapshot:q") && slices.ContainsFunc(f.presences, func(p *messages.Presence) bool {
			return p.GetUser() == target && p.GetStatus() == status
		}):
			step = 2
		case step == 2 && f.kind == "restored":
			step = 3
		case step == 3 && f.kind == "snapshot:"+core.RestoredID:
			return nil
		}
	}
	want := []string{"degraded " + strings.Join(targets, ","), "a query answer with " + target + " " + status.String(), "restored", "the snapshot restored"}
	return fmt.Errorf("%s: %s missing (wanted in order: %s); frames %v", d.name, want[step], strings.Join(want, ", "), d.kinds())
}

// kinds lists the frames' kinds; d.mu held.
func (d *wireDevice) kinds() []string {
	var ks []string
	for _, f := range d.frames {
		ks = append(ks, f.kind)
	}
	return ks
}

func (d *wireDevice) wentBack() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.back)
}

// degradedOn lists the members /api/cluster on p reports degraded.
func degradedOn(p *proc) []string {
	var c admin.Cluster
	p.getJSON("/api/cluster", &c)
	return slices.Sorted(maps.Keys(c.Degraded))
}

// truth is each user's status as p's admin API answers it.
func truth(t *testing.T, p *proc, users ...string) map[string]messages.Status {
	t.Helper()
	out := map[string]messages.Status{}
	for _, u := range users {
		var st admin.UserPresence
		if code := p.getJSON("/api/presence/"+u, &st); code != 200 {
			t.Fatalf("GET /api/presence/%s: %d", u, code)
		}
		out[u] = messages.Status(messages.Status_value[st.Status])
	}
	return out
}

// Issue 25's degraded mode on three real nodes, with thresholds so tiny
// that any fan-out degrades the node writing it: three raw devices (two
// on n1, one on n2) and an SDK session (on n3) subscribe to alice and
// carol batched. alice coming online degrades their nodes: each raw
// device gets degraded naming both; carol comes online while they are
// degraded and reaches them in a query answer; once the fan-out has been
// quiet for --restore-after, restored and the snapshot "restored" follow,
// presence_degraded and /api/cluster's degraded go back to 0. alice then
// leaves (degrading the nodes again); in the end every device holds what
// /api/presence says, no version having gone back on the wire.
func TestClusterDegradedMode(t *testing.T) {
	t.Parallel() // its own nodes; waits, mostly (make test's time)
	nodes, _ := startCluster(t, 3, "--degrade-at", "2us", "--degrade-below", "1us", "--restore-after", "3s",
		"--degraded-pull", "400ms", "--batch-window", "100ms")
	for _, u := range []string{"alice", "carol"} {
		nodes[0].allow(u, "bob1", "bob2", "bob3", "bob4")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	wires := []*wireDevice{dialWire(ctx, t, nodes[0], "bob1"), dialWire(ctx, t, nodes[0], "bob2"), dialWire(ctx, t, nodes[1], "bob3")}
	tok, _ := gateway.Tokens{Key: []byte("e2e")}.Mint("bob4", "phone", time.Hour)
	sdk := client.Start(ctx, client.Config{URLs: []string{"ws://" + nodes[2].listen + "/ws"}, Token: tok})
	go func() {
		for range sdk.Events() {
		}
	}()
	pushing := func() bool {
		for _, n := range nodes {
			if n.metric("presence_degraded") != 0 || len(degradedOn(n)) != 0 {
				return false
			}
		}
		return true
	}
	waitFor(t, 15*time.Second, "every node pushing (their own devices' onlines degraded them)", pushing)
	for _, w := range wires {
		if err := w.c.SubscribeTier(ctx, "s", messages.Tier_batched, "alice", "carol"); err != nil {
			t.Fatal(err)
		}
	}
	sdk.SubscribeTier(messages.Tier_batched, "alice", "carol")
	for _, w := range wires {
		waitFor(t, 10*time.Second, w.name+"'s snapshot", func() bool { return w.saw("snapshot:s") })
	}
	waitFor(t, 15*time.Second, "every node pushing again", pushing)

	alice := nodes[1].dialAlive(ctx, "alice", "phone", 1)
	for _, w := range wires {
		waitFor(t, 10*time.Second, w.name+" told to pull", func() bool { return w.saw("degraded") })
	}
	waitFor(t, 5*time.Second, "/api/cluster reports n1 degraded", func() bool { return slices.Contains(degradedOn(nodes[2]), "n1") })
	nodes[2].dialAlive(ctx, "carol", "phone", 1)
	for _, w := range wires {
		waitFor(t, 20*time.Second, w.name+" restored", func() bool { return w.saw("snapshot:" + core.RestoredID) })
		if err := w.pulledDuringDegraded([]string{"alice", "carol"}, "carol", messages.Status_online); err != nil {
			t.Error(err)
		}
	}
	waitFor(t, 10*time.Second, "presence_degraded 0 and no node degraded in /api/cluster", pushing)
	_ = alice.Close()
	checkTruth(ctx, t, nodes, wires, sdk)
}

// checkTruth, once alice left, waits until the nodes see her offline,
// every device holds the truth and every node pushes, and checks no
// version went back on the wire.
func checkTruth(ctx context.Context, t *testing.T, nodes []*proc, wires []*wireDevice, sdk *client.Session) {
	t.Helper()
	want := map[string]messages.Status{"alice": messages.Status_offline, "carol": messages.Status_online}
	holds := func(get func(string) messages.Status) bool {
		for u, st := range want {
			if get(u) != st {
				return false
			}
		}
		return true
	}
	waitFor(t, 10*time.Second, "the nodes see alice offline", func() bool {
		got := truth(t, nodes[0], "alice", "carol")
		return maps.Equal(got, want)
	})
	for _, w := range wires {
		waitFor(t, 20*time.Second, w.name+" holds the truth", func() bool { return holds(w.status) })
	}
	waitFor(t, 20*time.Second, "the SDK session holds the truth", func() bool {
		return holds(func(u string) messages.Status { p, _ := sdk.State(u); return p.GetStatus() })
	})
	for _, n := range nodes {
		waitFor(t, 15*time.Second, n.name+" pushing at the end", func() bool { return n.metric("presence_degraded") == 0 })
	}
	if got := truth(t, nodes[2], "alice", "carol"); !maps.Equal(got, want) {
		t.Errorf("the truth moved: %v", got)
	}
	for _, w := range wires {
		if back := w.wentBack(); len(back) > 0 {
			t.Errorf("%s: versions went back on the wire: %v", w.name, back)
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the test ran out of time")
	}
}
