package js_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/chaos"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/gateway"
)

// slack is what the test adds to a bound: the page's polling (20 ms), a
// round trip to the browser, and a loaded machine's scheduling.
const slack = 300 * time.Millisecond

// handshakeSlack is what a failover adds for its handshakes' round trips
// besides the slack (docs/bounds.md, "A browser's failover").
const handshakeSlack = time.Second

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// failoverBound is docs/bounds.md's browser failover: the silence limit
// (the page's SDK's, of its hello's heartbeat interval), the failure
// detection (GET /api/bounds) and three back-off minima (the SDK's).
func failoverBound(b tab, bounds admin.Bounds) time.Duration {
	b.t.Helper()
	var sdk struct{ Silence, BackoffMin int64 }
	b.eval(`(async () => { const m = await import("/sdk/presence.js");
		return { silence: m.silenceLimit(presenceDemo.client.hello.heartbeat_interval_ms), backoffMin: m.DEFAULTS.backoffMinMs }; })()`, &sdk)
	return ms(sdk.Silence) + ms(bounds.Timing.FailureDetectionMs) + 3*ms(sdk.BackoffMin)
}

// demoUsers are the users of the test: each other's exact contacts.
var demoUsers = []string{"demo-000", "demo-001", "demo-002", "demo-003"}

// demoCluster starts three presenced processes with the development
// secret (the demo's condition), on loopback, and the demo users'
// policies.
func demoCluster(t *testing.T, ctx context.Context) []*chaos.Node {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs presenced")
	}
	dir := t.TempDir()
	bin, err := chaos.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	c := &chaos.Cluster{Bin: bin, Dir: dir, Secret: config.DevSecret}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s's log:\n%s", n.ID, n.Log())
			}
		}
		c.Stop()
	})
	if err := c.Start(ctx, 3); err != nil {
		t.Fatal(err)
	}
	for _, u := range demoUsers {
		var others []string
		for _, o := range demoUsers {
			if o != u {
				others = append(others, `"`+o+`"`)
			}
		}
		if err := c.Nodes[1].PutPolicy(ctx, u, `{"granularity":"exact","contacts":[`+strings.Join(others, ",")+`]}`); err != nil {
			t.Fatal(err)
		}
	}
	return c.Nodes
}

// goDevice keeps user's phone online through the Go SDK on nodes until
// the returned stop.
func goDevice(t *testing.T, ctx context.Context, user string, nodes ...*chaos.Node) (stop func()) {
	t.Helper()
	tok, err := gateway.Tokens{Key: []byte(config.DevSecret)}.Mint(user, "phone", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, n := range nodes {
		urls = append(urls, "ws://"+n.Listen+"/ws")
	}
	sctx, cancel := context.WithCancel(ctx)
	s := client.Start(sctx, client.Config{URLs: urls, Token: tok})
	go func() {
		for range s.Events() {
		}
	}()
	stop = func() { cancel(); <-s.Done() }
	t.Cleanup(stop)
	return stop
}

// tab runs steps in one browser tab, failing the test with the page's
// text when a condition is not met in time.
type tab struct {
	t   *testing.T
	ctx context.Context
}

func (b tab) do(what string, a chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, a); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// until polls a JavaScript condition for up to within; it returns how
// long it took.
func (b tab) until(what, expr string, within time.Duration) time.Duration {
	b.t.Helper()
	start := time.Now()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		demo, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](
			`JSON.stringify({codes: presenceDemo.codes, refreshes: presenceDemo.refreshes, dials: presenceDemo.dials, regressions: presenceDemo.regressions})`))
		b.t.Fatalf("%s (%s) within %v: %v\n%s\nthe page:\n%s", what, expr, within, err, demo, page)
	}
	return time.Since(start)
}

// eval decodes the JSON of expr's value (a promise's, awaited) into v.
func (b tab) eval(expr string, v any) {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`Promise.resolve(`+expr+`).then((v) => JSON.stringify(v))`, chromedp.EvalAwaitPromise))
	if err == nil {
		err = json.Unmarshal([]byte(s), v)
	}
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
}

// contact is the page's row of user: status and show as the page shows them.
func contact(user, status string) string {
	return fmt.Sprintf(`document.querySelector('#contacts li[data-user="%s"]')?.dataset.status === "%s"`, user, status)
}

const connected = `document.querySelector("#conn").dataset.state === "connected"`

// The demo page on three real nodes: it signs in, sees a contact go
// online and offline within the bound (graceful close, then the batched
// tier's window: the page subscribes its contacts batched), keeps a
// growing attempt across a reload, sets its status, moves to another
// node within the browser failover bound when its own is killed, with its
// contacts' states and no version going back, and refreshes an expired
// token through its callback while another page sees the status; a
// screenshot is written. Every bound comes from GET /api/bounds and the
// page's hello.
func TestDemoOnThreeNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bctx := browse(t, 90*time.Second)
	b := tab{t, bctx}
	b.do("start the browser", chromedp.Navigate("about:blank")) // apart from the cluster's start
	nodes := demoCluster(t, ctx)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	bounds, err := n2.Bounds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	goDevice(t, ctx, "demo-001", n2, n3)
	page := fmt.Sprintf("http://%s/demo?users=%d&user=demo-000&nodes=%s,%s", n1.Listen, len(demoUsers), n2.Listen, n3.Listen)
	b.do("open the demo on n1", chromedp.Navigate(page))
	b.until("connected to n1", connected+` && document.querySelector("#conn").dataset.node === "n1"`, 10*time.Second)
	// the page's subscribes activated its contacts' views: one the
	// cluster's start may have moved holds a departure until settle after
	// its activation (docs/bounds.md, "When they hold")
	settled := time.Now().Add(ms(bounds.Timing.SettleMs))
	b.until("demo-001 online", contact("demo-001", "online"), 10*time.Second)

	stop := goDevice(t, ctx, "demo-002", n3)
	t.Logf("demo-002 online on the page after %v", b.until("demo-002 online", contact("demo-002", "online"), 10*time.Second))
	time.Sleep(time.Until(settled))
	stop()
	offline := ms(bounds.GracefulCloseMs+bounds.Timing.BatchWindowMs) + slack
	t.Logf("demo-002 offline on the page %v after its close (bound %v)", b.until("demo-002 offline", contact("demo-002", "offline"), offline), offline)

	reload(b)
	hidden(b, bctx, ctx, n2, bounds)
	b.do("choose dnd", chromedp.SetValue(`#show`, "dnd"))
	b.do("type a status", chromedp.SendKeys(`#text`, "in a meeting"))
	b.do("set the status", chromedp.Click(`#status button`))
	b.until("your status shown", `document.querySelector("#mine").textContent.startsWith('dnd "in a meeting"')`, 5*time.Second)
	killAndFailover(b, n1, bounds)
	refreshed(t, bctx, n2, n3)
	refused(t, bctx, n2)
	screenshot(t, bctx, "demo.png")
}

// reload: the page signs in again with a greater attempt, on its first
// dial (a stale attempt would be refused, 409, and dial again).
func reload(b tab) {
	b.t.Helper()
	var before int64
	b.eval(`Number(document.querySelector("#conn").dataset.attempt)`, &before)
	b.do("reload", chromedp.Reload())
	b.until("connected after the reload", connected, 10*time.Second)
	var after struct {
		Attempt int64
		Stored  int64
		Dials   int
	}
	b.eval(`({attempt: Number(document.querySelector("#conn").dataset.attempt), stored: Number(localStorage.getItem("presence.attempt")), dials: presenceDemo.dials})`, &after)
	if after.Attempt <= before || after.Stored != after.Attempt || after.Dials != 1 {
		b.t.Fatalf("after the reload: attempt %d (before %d), stored %d, dials %d: want a greater attempt on the first dial", after.Attempt, before, after.Stored, after.Dials)
	}
	b.until("demo-001 online after the reload", contact("demo-001", "online"), 10*time.Second)
}

// killAndFailover kills the page's node: the page connects to another
// within the browser failover bound, its contacts' states (one online,
// one offline) are right within settle and a batch window after, and no
// version went back.
func killAndFailover(b tab, n1 *chaos.Node, bounds admin.Bounds) {
	b.t.Helper()
	var versions map[string]string
	b.eval(`Object.fromEntries([...presenceDemo.client.states()].filter(([, p]) => p.version).map(([u, p]) => [u, p.version]))`, &versions)
	failover := failoverBound(b, bounds) + handshakeSlack + slack
	n1.Kill()
	took := b.until("connected to another node", connected+` && document.querySelector("#conn").dataset.node !== "n1"`, failover)
	// a view that lived on n1 is re-created: its snapshot may say unknown
	// (no version) until the state follows within settle, in the next batch
	states := ms(bounds.Timing.SettleMs+bounds.Timing.BatchWindowMs) + slack
	right := b.until("demo-001 online and demo-002 offline after the failover", contact("demo-001", "online")+" && "+contact("demo-002", "offline"), states)
	b.t.Logf("on another node %v after the kill (bound %v), contacts' states %v later (bound %v)", took, failover, right, states)
	var after struct {
		Versions    map[string]string
		Regressions []any
	}
	b.eval(`({versions: Object.fromEntries([...presenceDemo.client.states()].map(([u, p]) => [u, p.version ?? "0"])), regressions: presenceDemo.regressions})`, &after)

	if len(after.Regressions) > 0 {
		b.t.Fatalf("versions went back on the page: %v", after.Regressions)
	}
	for u, v := range versions {
		if w, ok := after.Versions[u]; !ok || less(w, v) {
			b.t.Fatalf("%s: version %s (kept: %v) after the failover, %s before", u, w, ok, v)
		}
	}
}

func less(a, b string) bool {
	x, _ := new(big.Int).SetString(a, 10)
	y, _ := new(big.Int).SetString(b, 10)
	return x == nil || y == nil || x.Cmp(y) < 0
}

// refreshed: a page signed in with a token of 4 s (3 to 4: whole
// seconds, time to connect before it expires on a loaded machine) is
// closed with 4401 when it expires, gets a new one through its refresh
// callback and is connected again.
func refreshed(t *testing.T, bctx context.Context, n2, n3 *chaos.Node) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(bctx) // a new tab
	defer cancel()
	b := tab{t, ctx}
	b.do("open the demo on n2 with a short token", chromedp.Navigate(fmt.Sprintf("http://%s/demo?users=%d&user=demo-003&ttl=4&nodes=%s", n2.Listen, len(demoUsers), n3.Listen)))
	b.until("connected", connected, 10*time.Second)
	b.until("refreshed after 4401 and connected again", `presenceDemo.refreshes >= 1 && presenceDemo.codes.includes(4401) && presenceDemo.client.connections >= 2 && `+connected, 10*time.Second)
	b.until("demo-001 online after the refresh", contact("demo-001", "online"), 5*time.Second)
	// demo-000's status, set on n1 before it died, told again on the next node
	b.until("demo-000 in a meeting", `(() => { const li = document.querySelector('#contacts li[data-user="demo-000"]');
		return li?.dataset.show === "dnd" && li.textContent.includes('"in a meeting"'); })()`, 5*time.Second)
}

// refused: a token the node does not take (a wrong signature, not
// expired) gets 401 at every handshake, which a browser does not see: the
// client calls refresh after refusedLimit dials that never opened, and
// when it gives the same token ends with a RefusedError, instead of
// dialing for ever.
func refused(t *testing.T, bctx context.Context, n2 *chaos.Node) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(bctx) // a new tab
	defer cancel()
	b := tab{t, ctx}
	b.do("open n2's demo page", chromedp.Navigate(fmt.Sprintf("http://%s/demo", n2.Listen)))
	var got struct {
		Name                string
		Dials, Refreshes, N int
	}
	b.eval(`(async () => {
		const m = await import("/sdk/presence.js");
		const claims = btoa("demo-003\nweb-bad\n" + (Math.floor(Date.now() / 1000) + 3600)).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
		const bad = claims + ".c2lnbmVkIGJ5IHNvbWVvbmUgZWxzZQ";
		let refreshes = 0;
		const c = new m.PresenceClient({ urls: ["/ws"], token: bad, refresh: () => { refreshes++; return bad; },
			refusedLimit: 3, backoffMinMs: 50, backoffMaxMs: 200, storage: null, trackActivity: false });
		return new Promise((ok) => {
			c.addEventListener("closed", (e) => ok({ name: e.detail.error?.name, dials: e.detail.error?.dials, refreshes, n: c.connections }));
			c.start();
		});
	})()`, &got)
	if got.Name != "RefusedError" || got.Dials != 3 || got.Refreshes != 1 || got.N != 0 {
		t.Fatalf("a token the node refuses: ended with %+v, want a RefusedError after 3 dials and 1 refresh, no connection", got)
	}
}

// hidden: a tab in front of the page (the same window) hides it; Chrome
// then runs its page timers once a second, slower than the fast timings'
// heartbeat (300 ms, stale 750 ms). The page declares background (the node
// routes its device so) and keeps its one connection for three stale
// limits, its heartbeats timed in a Worker; in front again it is active.
func hidden(b tab, bctx, ctx context.Context, n *chaos.Node, bounds admin.Bounds) {
	b.t.Helper()
	var before int
	b.eval(`presenceDemo.client.connections`, &before)
	front, cancel := chromedp.NewContext(bctx, chromedp.WithNewWindow(false))
	defer cancel()
	if _, err := chromedp.Run(front, chromedp.Navigate("about:blank")); err != nil {
		b.t.Fatal(err)
	}
	b.until("hidden, background", `document.hidden && presenceDemo.client.activity === "background"`, 5*time.Second)
	background := func() bool {
		ds, err := n.RouteDevices(ctx, "demo-000")
		return err == nil && len(ds) == 1 && ds[0].Platform == "web" && ds[0].Activity == "background"
	}
	for deadline := time.Now().Add(5 * time.Second); !background(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.t.Fatal("the node does not route demo-000's web device as background 5 s after its page was hidden")
		}
	}
	hold := 3 * ms(bounds.Timing.StaleMs)
	for until := time.Now().Add(hold); time.Now().Before(until); time.Sleep(100 * time.Millisecond) {
		var conns int
		b.eval(`presenceDemo.client.connected ? presenceDemo.client.connections : -1`, &conns)
		if conns != before || !background() {
			var codes []any
			b.eval(`presenceDemo.codes`, &codes)
			b.t.Fatalf("hidden, the page lost its connection (connections %d, was %d; closes %v) or its device", conns, before, codes)
		}
	}
	cancel() // the tab in front closes
	b.until("in front again, active", `!document.hidden && presenceDemo.client.activity === "active"`, 5*time.Second)
	b.t.Logf("hidden for %v (three stale limits) on one connection, routed as background", hold)
}
