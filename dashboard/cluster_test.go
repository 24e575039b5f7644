package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/chaos"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/gateway"
)

// threeNodes starts three presenced processes (fast timings, a cluster key,
// an admin token) and returns them.
func threeNodes(t *testing.T, ctx context.Context) []*chaos.Node {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs presenced")
	}
	dir := t.TempDir()
	bin, err := chaos.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	c := &chaos.Cluster{Bin: bin, Dir: dir, Secret: "e2e", Args: []string{"--admin-token", "tok"}}
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
	return c.Nodes
}

// device connects user/device through n and heartbeats until ctx ends or
// the returned close is called.
func device(t *testing.T, ctx context.Context, n *chaos.Node, user, dev string) (closeIt func()) {
	t.Helper()
	tok, err := gateway.Tokens{Key: []byte("e2e")}.Mint(user, dev, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, "ws://"+n.Listen+"/ws", client.DialOptions{Token: tok, Attempt: 1})
	if err != nil {
		t.Fatalf("dial %s/%s on %s: %v", user, dev, n.ID, err)
	}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for seq := uint64(1); dctx.Err() == nil && c.Heartbeat(dctx, seq) == nil; seq++ {
			select {
			case <-dctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	closeIt = func() { stop(); <-done; _ = c.Close() }
	t.Cleanup(func() { stop(); <-done; _ = c.CloseNow() })
	return closeIt
}

// historyHas reports whether n's history holds n3's death and user's
// published offline.
func historyHas(ctx context.Context, n *chaos.Node, user string) bool {
	var h admin.Snapshot
	if code, err := getJSON(ctx, n, "/api/history", &h); err != nil || code != 200 {
		return false
	}
	dead, off := false, false
	for _, ev := range h.Events {
		dead = dead || ev.Kind == "member" && ev.Member == "n3" && ev.Reason == "dead"
		off = off || ev.Kind == "published" && ev.User == user && ev.Status == "offline" && ev.LatencyMs > 0
	}
	return dead && off
}

// crowd are the users of the devices that go down with n3.
var crowd = []string{"bob", "carl", "dora", "emil", "fred", "gina"}

// getJSON GETs an admin path of n with the test's token.
func getJSON(ctx context.Context, n *chaos.Node, path string, v any) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.Admin+path, nil)
	req.Header.Set("Authorization", "Bearer tok")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	return res.StatusCode, json.NewDecoder(res.Body).Decode(v)
}

// The page of n1 on a 3-node cluster: n2's connections and leases listed
// with their state (asked over the actor transport), alice's graph across
// the nodes with each lease's expiry, updating when her laptop leaves;
// the renewal and actor charts with points; then n3 killed, and a page
// opened after its death shows it in the membership timeline and the
// offline of a device of n3 against its bound.
func TestDashboardOnThreeNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b := browse(t)
	// the browser's start first, apart from the cluster's: a loaded machine
	// can make a member miss probes while three nodes and a browser start
	if _, err := chromedp.Run(b, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	nodes := threeNodes(t, ctx)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	device(t, ctx, n2, "alice", "phone")
	leave := device(t, ctx, n3, "alice", "laptop")
	// devices through n3 whose users' views live elsewhere publish an
	// offline when n3 dies; one whose view dies with it is offline in a
	// view re-created empty, which publishes nothing
	for _, u := range crowd {
		device(t, ctx, n3, u, "phone")
	}

	tab := b // the browser tab the steps run in
	step := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		if _, err := chromedp.Run(tab, a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	until := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(tab, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			page, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
			// A member declared dead before the kill (a false death: probes
			// missed on a loaded machine) shows in the timeline of the page.
			t.Fatalf("%s (%s): %v\nthe page:\n%s", what, expr, err, page)
		}
	}
	page := "http://" + n1.Admin + "/#token=tok"
	step("open n1's page", chromedp.Navigate(page))
	until("the node choice lists the members", `document.querySelector("#actors-node").dataset.ids === "n1,n2,n3"`)
	step("choose n2", chromedp.SetValue(`#actors-node`, "n2"))
	step("choose leases", chromedp.SetValue(`#actors-kind`, "lease"))
	step("search alice", chromedp.SendKeys(`#actors-q`, "alice/"))
	step("list", chromedp.Click(`#actors-form button`))
	until("n2's lease list answered", `document.querySelector("#actors").dataset.node === "n2" && document.querySelector("#actors").dataset.kind === "lease"`)
	step("choose connections", chromedp.SetValue(`#actors-kind`, "connection"))
	step("list", chromedp.Click(`#actors-form button`))
	until("alice's phone among n2's connections", `(document.querySelector('#actors tbody tr[data-key="alice/phone"]')?.textContent || "").includes("via n2")`)

	step("type alice", chromedp.SendKeys(`#user`, "alice"))
	step("look up", chromedp.Click(`#lookup button`))
	until("alice's graph with two devices, each lease expiring", `document.querySelector("#graph").dataset.devices === "2" && document.querySelectorAll("#graph g.lease[data-expires-in-ms]").length === 2`)
	until("renewals per second drawn", `document.querySelector('#renewals polyline[data-series="renewals"]')?.dataset.points >= 2`)
	until("actors over time drawn", `document.querySelector('#series polyline[data-series="actors"]')?.dataset.points >= 2`)
	shoot(t, b, "cluster-actors-and-user.png")

	leave()
	until("alice's graph after the laptop left", `document.querySelector("#graph").dataset.devices === "1" && document.querySelector("#graph").textContent.includes("connection phone on n2")`)

	var survivors []string // users whose view is not on n3
	for _, u := range crowd {
		var g admin.Graph
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			code, err := getJSON(ctx, n1, "/api/users/"+u+"/graph", &g)
			if err == nil && code == 200 && len(g.Devices) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's graph with its phone: %d %v %+v", u, code, err, g)
			}
		}
		if g.View.Node != "n3" {
			survivors = append(survivors, u)
		}
	}
	if len(survivors) == 0 {
		t.Fatalf("every view of %v on n3: placement does not spread identities", crowd)
	}
	n3.Kill()
	killed := time.Now()
	until("n1's page sees n3 dead", `(document.querySelector('#members tbody tr[data-member="n3"]')?.textContent || "").includes("dead")`)
	// The page is opened once n1's history holds the death and the
	// survivor's offline: what a person opening it later finds. (A page
	// opened in the very moment of the death missed some of its events in
	// some runs on the loaded machine: not understood yet.)
	for deadline := time.Now().Add(20 * time.Second); !historyHas(ctx, n1, survivors[0]); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("n1's history has no death of n3 and offline of %s 20 s after the kill", survivors[0])
		}
	}
	step("leave the first page", chromedp.Navigate("about:blank"))
	late, closeLate := chromedp.NewContext(b) // a new tab
	defer closeLate()
	tab = late
	step("a new page, opened after the death", chromedp.Navigate(page))
	until("the timeline shows n3's death", `(document.querySelector('#timeline tbody tr[data-member="n3"]')?.textContent || "").includes("dead")`)
	until(survivors[0]+"'s offline on the latency chart", `[...document.querySelectorAll("#latency circle.dot title")].some((t) => t.textContent.startsWith("`+survivors[0]+`:"))`)
	t.Logf("n3's death and %s's offline on a new page %v after the kill", survivors[0], time.Since(killed).Round(time.Millisecond))
	shoot(t, late, "cluster-after-a-death.png")
	if os.Getenv("PRESENCE_SCREENSHOTS") == "" {
		t.Log("set PRESENCE_SCREENSHOTS=DIR to keep the screenshots")
	}
}
