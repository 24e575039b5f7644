package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store/sqlite"
	"github.com/presence-im/presence/webhook"
)

const hookSecret = "e2e-webhook-secret-0123456789"

// hookReceiver is the backend: it checks every signature with
// client.VerifyWebhook, answers 500 while failing (503 while down), holds
// open the requests that carry an event holdOpen's match accepts, and keeps
// every event it took in the order they came. A held request's events count as taken when it is released,
// whether its sender is still there or not: a backend that stored the
// batch and whose 2xx never reached a node killed meanwhile.
type hookReceiver struct {
	failing, down atomic.Bool

	mu     sync.Mutex
	hold   chan struct{} // non-nil: matching requests wait for it to close
	match  func(webhook.Event) bool
	held   []webhook.Event
	events []webhook.Event
	bad    int
}

func newHookReceiver(t *testing.T) (*hookReceiver, string) {
	rc := &hookReceiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	t.Cleanup(rc.release) // first: the server's Close waits for its handlers
	return rc, srv.URL + "/hooks"
}

func (rc *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := client.VerifyWebhook([]byte(hookSecret), r.Header.Get(webhook.SignatureHeader), body, time.Now(), time.Minute); err != nil {
		rc.mu.Lock()
		rc.bad++
		rc.mu.Unlock()
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if rc.down.Load() || rc.failing.Load() {
		http.Error(w, "down for now", http.StatusInternalServerError)
		return
	}
	var b struct{ Events []webhook.Event }
	_ = json.Unmarshal(body, &b)
	rc.mu.Lock()
	hold := rc.hold
	if hold != nil && slices.ContainsFunc(b.Events, rc.match) {
		rc.held = append(rc.held, b.Events...)
	} else {
		hold = nil
	}
	rc.mu.Unlock()
	if hold != nil {
		<-hold
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.events = append(rc.events, b.Events...)
}

// holdOpen makes the requests carrying an event match accepts wait until
// release; others are taken at once (a node's worker sends one batch at a
// time: one held that the test did not ask for, a check of a dead node's
// row say, would keep the awaited change from going out at all).
func (rc *hookReceiver) holdOpen(match func(webhook.Event) bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.hold, rc.held, rc.match = make(chan struct{}), nil, match
}

func (rc *hookReceiver) release() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.hold != nil {
		close(rc.hold)
		rc.hold = nil
	}
}

// holding reports whether a request is held open.
func (rc *hookReceiver) holding() bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.held) > 0
}

func (rc *hookReceiver) all() []webhook.Event {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.events)
}

// latest is the user's event of the highest version taken.
func (rc *hookReceiver) latest(user string) webhook.Event {
	var out webhook.Event
	for _, ev := range rc.all() {
		if ev.User == user && ev.Version >= out.Version {
			out = ev
		}
	}
	return out
}

// eventPlatforms are an event's devices' platforms, as a subscriber at exact
// granularity sees them: each once, sorted.
func eventPlatforms(ev webhook.Event) []string {
	var out []string
	for _, d := range ev.Devices {
		if !slices.Contains(out, d.Platform) {
			out = append(out, d.Platform)
		}
	}
	slices.Sort(out)
	return out
}

// change is one state of a user a view published, as a subscriber saw it.
type change struct {
	user      string
	version   uint64
	status    string
	platforms []string
}

func changeOf(p *messages.Presence) change {
	c := change{user: p.GetUser(), version: p.GetVersion(), status: p.GetStatus().String()}
	for _, d := range p.GetDevices() {
		c.platforms = append(c.platforms, d.GetPlatform().String())
	}
	slices.Sort(c.platforms)
	return c
}

// recorder keeps every change a subscriber was sent: its snapshot and
// each event after.
type recorder struct {
	mu   sync.Mutex
	seen []change
}

func record(ctx context.Context, t *testing.T, c *client.Conn, users []string) *recorder {
	t.Helper()
	r := &recorder{}
	for _, p := range subscribe(ctx, t, c, users...).GetPresences() {
		r.add(p)
	}
	go func() {
		for {
			f, err := c.Next(ctx)
			if err != nil {
				return
			}
			if p := f.GetPresence(); p != nil {
				r.add(p)
			}
		}
	}()
	return r
}

func (r *recorder) add(p *messages.Presence) {
	if p.GetStatus() != messages.Status_online && p.GetStatus() != messages.Status_offline {
		return // unknown: no state the webhooks tell
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, changeOf(p))
}

// await waits until the subscriber saw user online on platforms.
func (r *recorder) await(t *testing.T, user string, platforms ...string) {
	t.Helper()
	slices.Sort(platforms)
	waitFor(t, 10*time.Second, fmt.Sprintf("%s online on %v", user, platforms), func() bool {
		return slices.ContainsFunc(r.all(), func(c change) bool {
			return c.user == user && c.status == "online" && slices.Equal(c.platforms, platforms)
		})
	})
}

func (r *recorder) all() []change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// asOf is what the receiver holds of a user as of version v: the event
// of the highest version not above v it took.
func asOf(evs []webhook.Event, user string, v uint64) (webhook.Event, bool) {
	var out webhook.Event
	found := false
	for _, ev := range evs {
		if ev.User == user && ev.Version <= v && ev.Version >= out.Version {
			out, found = ev, true
		}
	}
	return out, found
}

// crash is a node killed while some users' changes were undelivered: the
// changes of its views' users from since (the receiver stopped taking
// them) until the views re-created elsewhere settled (its death at plus
// the owner-crash bound, Unix ms) may be coalesced into their latest
// (docs/webhooks.md, "The guarantee").
type crash struct {
	node         string
	owners       map[string]string // each user's view owner when it was killed
	since, until uint64
}

func (c crash) allows(ch change) bool {
	return c.owners[ch.user] == c.node && ch.version >= c.since && ch.version <= c.until
}

// killed kills c's node and marks the end of its window: bounds are a
// survivor's.
func (c *crash) killed(p *proc, bounds admin.Bounds) {
	p.kill()
	c.until = uint64(time.Now().UnixMilli()) + uint64(bounds.OwnerCrashMs)
}

// placement is how p places actors over the members it sees alive (as
// ownedBy does), and the member id of each actor address.
func placement(t *testing.T, p *proc) (*cluster.Rendezvous, map[string]string) {
	t.Helper()
	var c admin.Cluster
	if code := p.getJSON("/api/cluster", &c); code != http.StatusOK {
		t.Fatalf("%s /api/cluster: %d", p.name, code)
	}
	var members []cluster.Placed
	ids := map[string]string{}
	for _, m := range c.Members {
		if m.State == cluster.Alive {
			members = append(members, cluster.Placed{Actor: m.Addresses[1], Kinds: []string{"lease", "view"}})
			ids[m.Addresses[1]] = m.ID
		}
	}
	return cluster.NewRendezvous(members), ids
}

// viewOwners maps users to the member that owns their view now.
func viewOwners(t *testing.T, p *proc, users []string) map[string]string {
	t.Helper()
	place, ids := placement(t, p)
	out := map[string]string{}
	for _, u := range users {
		out[u] = ids[place.Owner("view", u)]
	}
	return out
}

// ownedAlone is a user, not among taken, whose view and phone's lease live
// on member id: her phone on id dies with it, and nothing brings her view
// back but the webhooks' check of her row.
func ownedAlone(t *testing.T, p *proc, id string, taken ...string) string {
	t.Helper()
	place, ids := placement(t, p)
	for i := range 2000 {
		u := fmt.Sprintf("lone%d", i)
		if ids[place.Owner("view", u)] == id && ids[place.Owner("lease", u+"/phone")] == id && !slices.Contains(taken, u) {
			return u
		}
	}
	t.Fatalf("no user whose view and phone live on %s", id)
	return ""
}

// checkDelivered fails for each change a subscriber saw that did not
// reach the receiver, unless a crash allows it; and for each user whose
// versions arrived out of order. A change reached the receiver if it
// holds that state as of its version (the change, or an equal state at a
// lower version: a publish the webhooks had no cause to tell), or took
// that state at a higher version before the user's next change (a view
// re-created after a crash tells what it published while its devices
// re-registered once it settles: docs/webhooks.md). It returns the
// duplicates: deliveries of a user's version beyond the first, wherever
// they came.
func checkDelivered(t *testing.T, rc *hookReceiver, seen []change, crashes ...crash) (dups int) {
	t.Helper()
	evs := rc.all()
	slices.SortStableFunc(seen, func(a, b change) int { return cmp.Compare(a.version, b.version) })
	missed, allowed := 0, 0
	for i, ch := range seen {
		if slices.ContainsFunc(crashes, func(c crash) bool { return c.allows(ch) }) {
			allowed++
			continue
		}
		next := uint64(math.MaxUint64)
		if j := slices.IndexFunc(seen[i+1:], func(c change) bool { return c.user == ch.user && c.version > ch.version }); j >= 0 {
			next = seen[i+1+j].version
		}
		same := func(ev webhook.Event) bool {
			return ev.Status == ch.status && slices.Equal(eventPlatforms(ev), ch.platforms)
		}
		ev, ok := asOf(evs, ch.user, ch.version)
		later := slices.ContainsFunc(evs, func(e webhook.Event) bool {
			return e.User == ch.user && e.Version > ch.version && e.Version < next && same(e)
		})
		if !(ok && same(ev)) && !later {
			missed++
			t.Errorf("%s's change v%d (%s %v) never reached the receiver: it holds v%d (%s %v) as of it, nothing equal before v%d",
				ch.user, ch.version, ch.status, ch.platforms, ev.Version, ev.Status, eventPlatforms(ev), next)
		}
	}
	byUser, count := map[string][]uint64{}, map[string]int{}
	for _, ev := range evs {
		byUser[ev.User] = append(byUser[ev.User], ev.Version)
		k := fmt.Sprintf("%s/%d", ev.User, ev.Version)
		if count[k]++; count[k] > 1 {
			dups++
		}
	}
	for u, vs := range byUser {
		if !slices.IsSorted(vs) {
			t.Errorf("%s's versions arrived out of order: %v", u, vs)
		}
	}
	t.Logf("%d changes seen by the subscriber, %d allowed to coalesce by a crash, %d missed; %d events received, %d duplicates", len(seen), allowed, missed, len(evs), dups)
	return dups
}

// matches reports whether the receiver's latest event of every user says
// what p's admin API says of it now: status and devices.
func (rc *hookReceiver) matches(p *proc, users []string) (bool, string) {
	for _, u := range users {
		var st struct {
			Status  string `json:"status"`
			Devices []struct {
				Device string `json:"device"`
			} `json:"devices"`
		}
		if code := p.getJSON("/api/presence/"+u, &st); code != 200 {
			return false, fmt.Sprintf("%s: lookup %d", u, code)
		}
		ev := rc.latest(u)
		var want, got []string
		for _, d := range st.Devices {
			want = append(want, d.Device)
		}
		for _, d := range ev.Devices {
			got = append(got, d.Device)
		}
		slices.Sort(want)
		slices.Sort(got)
		if ev.Status != st.Status || !slices.Equal(want, got) {
			return false, fmt.Sprintf("%s: received %s %v (v%d), the node says %s %v", u, ev.Status, got, ev.Version, st.Status, want)
		}
	}
	return true, ""
}

// converge waits until the receiver's latest of every user is what p says.
func (rc *hookReceiver) converge(t *testing.T, p *proc, users []string, within time.Duration) {
	t.Helper()
	why := ""
	defer func() {
		if t.Failed() {
			t.Logf("the last difference: %s", why)
		}
	}()
	waitFor(t, within, "every user's latest state at the receiver", func() bool {
		ok, w := rc.matches(p, users)
		why = w
		return ok
	})
}

// toldOffline waits until the receiver's latest of user is an offline
// with reason.
func (rc *hookReceiver) toldOffline(t *testing.T, user, reason string, within time.Duration) {
	t.Helper()
	defer func() {
		if t.Failed() {
			for _, ev := range rc.all() {
				if ev.User == user {
					t.Logf("received %+v", ev)
				}
			}
		}
	}()
	waitFor(t, within, user+" told offline ("+reason+")", func() bool {
		ev := rc.latest(user)
		return ev.Status == "offline" && ev.Reason == reason
	})
}

var (
	phone  = device{"phone", messages.Platform_mobile}
	laptop = device{"laptop", messages.Platform_desktop}
	tablet = device{"tablet", messages.Platform_web}
)

// device is a device of a user; each has its own platform, so that a
// subscriber at exact granularity sees each come and go.
type device struct {
	name     string
	platform messages.Platform
}

// dialDevice connects d of user, in the background, heartbeating until
// ctx ends; attempt (optional, default 1) is the device's connection
// attempt: each reconnect needs a higher one.
func (p *proc) dialDevice(ctx context.Context, user string, d device, attempt ...uint64) *client.Conn {
	p.t.Helper()
	tok, _ := gateway.Tokens{Key: []byte("e2e")}.Mint(user, d.name, time.Hour)
	a := uint64(1)
	if len(attempt) > 0 {
		a = attempt[0]
	}
	c, err := client.Dial(ctx, "ws://"+p.listen+"/ws", client.DialOptions{Token: tok, Attempt: a, Platform: d.platform, Activity: messages.Activity_background})
	if err != nil {
		p.t.Fatalf("dial %s/%s on %s: %v", user, d.name, p.name, err)
	}
	p.t.Cleanup(func() { _ = c.CloseNow() })
	keepAlive(ctx, c)
	return c
}

// Issue 26's test on three real nodes with a real HTTP receiver. Devices
// come and go, seen by a subscriber on n1 that records every change the
// views publish. The receiver answers 500 for a while; n3, owning a third
// of the users' views, is killed with their changes undelivered and its
// worker backing off. Once n1 dropped n3 from its quorum base, the
// receiver holds requests open and n2 is killed while its POST of a
// change is in flight. At the end every change the subscriber saw reached
// the receiver at least once, but those of a killed node's users it
// published while the receiver could not take them (docs/webhooks.md: the
// latest state of those users arrives); each user's versions in order;
// every signature valid; the rows of users nothing else brings back
// claimed by the survivors (and told offline, owner_crash); duplicates at
// most one per user whose view a killed node held.
func TestClusterWebhooks(t *testing.T) {
	t.Parallel() // its own nodes; waits, mostly (make test's time)
	rc, url := newHookReceiver(t)
	nodes, _ := startCluster(t, 3, "--webhook-url", url, "--webhook-secret", hookSecret, "--webhook-retry-max", "1s")
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	users := []string{ownedBy(t, n1, "n3")}
	for i := range 23 {
		users = append(users, fmt.Sprintf("w%02d", i))
	}
	lone3 := ownedAlone(t, n1, "n3", users...) // watched by nobody
	conns := map[string]*client.Conn{}
	for i, u := range users {
		n1.allow(u, "sam")
		conns[u] = nodes[i%2].dialDevice(ctx, u, phone) // n1 and n2: n3's own devices die with it
	}
	n3.dialDevice(ctx, lone3, phone)
	n1.waitOnline(append(users, lone3)...)
	sam := n1.dial(ctx, "sam", "phone", 1)
	keepAlive(ctx, sam)
	seen := record(ctx, t, sam, users)
	rc.converge(t, n1, append(users, lone3), 15*time.Second)

	// n3 killed with its worker backing off: the receiver fails.
	failing := uint64(time.Now().UnixMilli())
	rc.failing.Store(true)
	for i, u := range users[:12] {
		if i%2 == 0 {
			_ = conns[u].Close()
		} else {
			nodes[(i+1)%3].dialDevice(ctx, u, laptop)
		}
	}
	// Changes one after another while the receiver fails: every one of
	// them is to arrive, not the last alone.
	for i, u := range users[12:18] {
		c := nodes[i%2].dialDevice(ctx, u, laptop)
		seen.await(t, u, "mobile", "desktop")
		_ = c.Close()
		seen.await(t, u, "mobile")
		nodes[i%2].dialDevice(ctx, u, tablet)
		seen.await(t, u, "mobile", "web")
	}
	waitFor(t, 10*time.Second, "n3 retrying", func() bool { return metricSum(t, n3, "presence_webhook_retried_total") > 0 })
	crash3 := crash{node: "n3", owners: viewOwners(t, n1, users), since: failing}
	bounds := n1.bounds()
	crash3.killed(n3, bounds)
	time.Sleep(time.Duration(bounds.OwnerCrashMs) * time.Millisecond)
	rc.failing.Store(false)
	rc.converge(t, n1, append(users, lone3), 30*time.Second)
	rc.toldOffline(t, lone3, "owner_crash", 15*time.Second)
	claimed3 := metricSum(t, n1, "presence_webhook_claimed_total") + metricSum(t, n2, "presence_webhook_claimed_total")
	if claimed3 < 1 {
		t.Fatalf("claimed %v rows of n3: want %s's at least", claimed3, lone3)
	}

	// n2 killed with its POST of a change in flight: the receiver holds it.
	n1.baseShrank(2, 30*time.Second)
	owners2 := viewOwners(t, n1, users)
	var x string
	for _, u := range users {
		if owners2[u] == "n2" {
			x = u
			break
		}
	}
	lone2 := ownedAlone(t, n1, "n2", append(users, lone3)...)
	n2.dialDevice(ctx, lone2, phone)
	n1.waitOnline(lone2)
	rc.converge(t, n1, append(users, lone2), 15*time.Second)
	claimedBefore := metricSum(t, n1, "presence_webhook_claimed_total")
	crash2 := crash{node: "n2", owners: owners2, since: uint64(time.Now().UnixMilli())}
	rc.holdOpen(func(ev webhook.Event) bool { return ev.User == x && slices.Contains(eventPlatforms(ev), "web") })
	n1.dialDevice(ctx, x, tablet)
	waitFor(t, 10*time.Second, "n2's POST of "+x+"'s tablet held open", rc.holding)
	crash2.killed(n2, bounds)
	rc.release()
	rc.converge(t, n1, append(users, lone2), 30*time.Second)
	rc.toldOffline(t, lone2, "owner_crash", 15*time.Second)
	if c := metricSum(t, n1, "presence_webhook_claimed_total"); c <= claimedBefore {
		t.Fatalf("n1 claimed no row of n2 (claimed %v before, %v after): want %s's at least", claimedBefore, c, lone2)
	}
	waitFor(t, 15*time.Second, "no row waiting", func() bool { return metricSum(t, n1, "presence_webhook_waiting") == 0 })

	rc.mu.Lock()
	bad := rc.bad
	rc.mu.Unlock()
	if bad != 0 {
		t.Fatalf("%d deliveries with a bad signature", bad)
	}
	dups := checkDelivered(t, rc, seen.all(), crash3, crash2)
	bound := 0
	for _, u := range users {
		if crash3.owners[u] == "n3" || crash2.owners[u] == "n2" {
			bound++
		}
	}
	bound += 2 // lone3's and lone2's rows, claimed
	if dups > bound {
		t.Fatalf("%d duplicates: want at most one per user whose view a killed node held (%d)", dups, bound)
	}
}

// A receiver down for good while devices keep coming and going on three
// nodes: the store holds exactly a row per user and endpoint, each node's
// backlog stays within --webhook-backlog and nothing waits for the store,
// and each node's live heap after a collection stays within a bound.
func TestWebhookReceiverDownIsBounded(t *testing.T) {
	t.Parallel() // its own nodes; waits, mostly (make test's time)
	rc, url := newHookReceiver(t)
	rc.down.Store(true)
	const backlog = 40
	nodes, db := startCluster(t, 3, "--webhook-url", url, "--webhook-secret", hookSecret, "--webhook-backlog", fmt.Sprint(backlog))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, err := sqlite.Open(strings.TrimPrefix(db, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Hooks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := webhook.Endpoint{URL: url}.Key()
	const users = 30
	var names []string
	for i := range users {
		names = append(names, fmt.Sprintf("d%02d", i))
	}
	heap := map[string][]float64{}
	for round := range 8 {
		var cs []*client.Conn
		for i, u := range names {
			cs = append(cs, nodes[i%3].dialDevice(ctx, u, []device{phone, laptop, tablet}[round%3], uint64(round+1)))
		}
		nodes[0].waitOnline(names...)
		for _, c := range cs {
			_ = c.Close()
		}
		waitFor(t, 10*time.Second, "everyone offline", func() bool {
			for _, u := range names {
				var p struct{ Status string }
				nodes[0].getJSON("/api/presence/"+u, &p)
				if p.Status != "offline" {
					return false
				}
			}
			return true
		})
		time.Sleep(300 * time.Millisecond) // past a flush
		if n, _ := st.CountHooks(ctx, key, ""); n != users {
			t.Fatalf("round %d: %d rows waiting for %d users: want one per user", round, n, users)
		}
		for _, p := range nodes {
			if b := metricSum(t, p, "presence_webhook_backlog"); b > backlog {
				t.Fatalf("round %d: %s holds %v changes in memory, over --webhook-backlog %d", round, p.name, b, backlog)
			}
			if v := metricValue(t, p, "presence_webhook_pending"); v != 0 {
				t.Fatalf("round %d: %s: %v changes waiting for the store", round, p.name, v)
			}
			heap[p.name] = append(heap[p.name], liveHeap(ctx, t, p))
		}
	}
	coalesced := 0.0
	for _, p := range nodes {
		coalesced += metricSum(t, p, "presence_webhook_coalesced_total")
		h := heap[p.name]
		// From the third round (the actors, pools and caches warm) to the
		// last: what a growing backlog or log would add, 16 changes a user.
		if grew := h[len(h)-1] - h[2]; grew > 2<<20 {
			t.Errorf("%s's live heap grew %.1f MB from round 3 to 8: %v", p.name, grew/(1<<20), h)
		}
	}
	if coalesced == 0 {
		t.Fatal("nothing coalesced: the backlog bound was never reached")
	}
	t.Logf("coalesced %v; live heap per round: %v", coalesced, heap)
}

// liveHeap is p's live heap after a collection: GET /debug/pprof/heap?gc=1
// collects, then go_gc_heap_live_bytes reads what it marked.
func liveHeap(ctx context.Context, t *testing.T, p *proc) float64 {
	t.Helper()
	if err := p.node.HeapProfile(ctx, filepath.Join(t.TempDir(), "heap.pprof")); err != nil {
		t.Fatal(err)
	}
	return metricValue(t, p, "go_gc_heap_live_bytes")
}

// metricSum is the sum of a metric's series in p's /metrics.
func metricSum(t *testing.T, p *proc, name string) float64 {
	t.Helper()
	res, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			var f float64
			fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &f)
			sum += f
		}
	}
	return sum
}

// metricValue is one unlabelled metric of p's /metrics.
func metricValue(t *testing.T, p *proc, name string) float64 {
	t.Helper()
	res, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	t.Fatalf("%s not in /metrics", name)
	return 0
}
