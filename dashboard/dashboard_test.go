package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}

type nopSocket struct{}

func (nopSocket) Send(*messages.Frame) bool        { return true }
func (nopSocket) Close(messages.CloseCode, string) {}

// snapSocket tells of the first snapshot sent to it.
type snapSocket struct{ snap chan struct{} }

func (s snapSocket) Send(f *messages.Frame) bool {
	if f.GetSnapshot() != nil {
		select {
		case s.snap <- struct{}{}:
		default:
		}
	}
	return true
}
func (snapSocket) Close(messages.CloseCode, string) {}

// browser finds the headless browser `make tools` installs.
func browser(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium: `make tools` installs Debian's chromium")
	return ""
}

// The page in a real headless browser: the node in the members table with
// its actors, a device's events arriving live, a user looked up.
func TestDashboardInBrowser(t *testing.T) {
	reg := prometheus.NewRegistry()
	n, err := actors.Start(actors.Deps{NodeID: "n1", Timing: config.Fast(), Seed: 1, Policies: store.NewMemoryPolicies(),
		History: store.NewMemoryHistory(), Metrics: actors.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	api := &admin.Server{Node: n, Members: cluster.Single{Member: cluster.Member{ID: "n1", State: cluster.Alive, Since: time.Now()}},
		Timing: config.Fast(), Policies: store.NewMemoryPolicies(), Gatherer: reg}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		n.Stop()
		time.Sleep(1100 * time.Millisecond) // proto.actor's dead-letter throttle goroutine
	})

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser(t)), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	run := func(a chromedp.Action[chromedp.Void]) {
		t.Helper()
		if _, err := chromedp.Run(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	run(chromedp.Navigate(srv.URL + "/"))
	run(chromedp.WaitVisible(`#members tbody tr[data-member="n1"]`))
	run(chromedp.WaitVisible(`#conn.ok`))
	if members, live := text(`#members tbody tr[data-member="n1"]`), text(`#conn`); !strings.Contains(members, "alive") || live != "live" {
		t.Fatalf("members row %q, stream %q", members, live)
	}

	c, err := n.Gateway().Open(context.Background(), actors.OpenRequest{User: "alice", Device: "phone", Attempt: 1, ConnID: "c1", Socket: nopSocket{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Closed()
	run(chromedp.WaitVisible(`#events tbody tr[data-kind="device_up"]`))
	up := text(`#events tbody tr[data-kind="device_up"]`)
	run(chromedp.SendKeys(`#user`, "alice"))
	run(chromedp.Click(`#lookup button`))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#result").textContent.includes("c1")`)); err != nil {
		t.Fatal(err)
	}
	result := text(`#result`)
	if !strings.Contains(up, "alice") || !strings.Contains(up, "phone") || !strings.Contains(result, `"status": "online"`) {
		t.Fatalf("event row %q, lookup %q", up, result)
	}
	http.DefaultClient.CloseIdleConnections()
}

// A degraded node (its fan-out backlog reached --degrade-at: here any
// fan-out does) is listed in /api/cluster's degraded with since when, and
// its row on the page says "degraded since"; before, neither does.
func TestDashboardShowsDegradedMode(t *testing.T) {
	reg := prometheus.NewRegistry()
	policies := store.NewMemoryPolicies()
	n, err := actors.Start(actors.Deps{NodeID: "n1", Timing: config.Fast(), Seed: 1, Policies: policies,
		History: store.NewMemoryHistory(), Metrics: actors.NewMetrics(reg),
		Degrade: config.Degrade{At: 2 * time.Microsecond, Below: time.Microsecond, RestoreAfter: time.Hour, Pull: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	api := &admin.Server{Node: n, Members: cluster.Single{Member: cluster.Member{ID: "n1", State: cluster.Alive, Since: time.Now()}},
		Timing: config.Fast(), Policies: policies, Gatherer: reg}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		n.Stop()
		time.Sleep(1100 * time.Millisecond) // proto.actor's dead-letter throttle goroutine
	})
	degraded := func() map[string]string {
		t.Helper()
		res, err := http.Get(srv.URL + "/api/cluster")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var c admin.Cluster
		if err := json.NewDecoder(res.Body).Decode(&c); err != nil {
			t.Fatal(err)
		}
		return c.Degraded
	}
	if d := degraded(); len(d) != 0 {
		t.Fatalf("degraded %v before any fan-out", d)
	}
	ctx := browse(t)
	run := func(a chromedp.Action[chromedp.Void]) {
		t.Helper()
		if _, err := chromedp.Run(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	run(chromedp.Navigate(srv.URL + "/"))
	run(chromedp.WaitVisible(`#members tbody tr[data-member="n1"]`))
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#members .degraded").length`)); err != nil || n != 0 {
		t.Fatalf("%d degraded marks before degraded mode (%v)", n, err)
	}

	// bob subscribes to alice; alice's online is a fan-out: n1 degrades.
	if err := policies.Put(context.Background(), "alice", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob"}}); err != nil {
		t.Fatal(err)
	}
	n.PolicyChanged("alice")
	open := func(user, conn string, sock actors.Socket) *actors.Conn {
		c, err := n.Gateway().Open(context.Background(), actors.OpenRequest{User: user, Device: "phone", Attempt: 1, ConnID: conn, Socket: sock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Closed)
		return c
	}
	bob := snapSocket{make(chan struct{}, 1)}
	open("bob", "c1", bob).Subscribe("s1", []string{"alice"}, messages.Tier_batched)
	select {
	case <-bob.snap:
	case <-time.After(10 * time.Second):
		t.Fatal("no snapshot for bob")
	}
	before := time.Now().Add(-time.Second)
	open("alice", "c2", nopSocket{})
	deadline := time.Now().Add(10 * time.Second)
	var d map[string]string
	for d = degraded(); d["n1"] == "" && time.Now().Before(deadline); d = degraded() {
		time.Sleep(20 * time.Millisecond)
	}
	if since, err := time.Parse(time.RFC3339, d["n1"]); err != nil || since.Before(before.Truncate(time.Second)) {
		t.Fatalf("/api/cluster degraded = %v: want n1 since it degraded (%v)", d, err)
	}
	run(chromedp.WaitVisible(`#members tbody tr[data-member="n1"] .degraded`))
	s, err := chromedp.Run(ctx, chromedp.Text(`#members tbody tr[data-member="n1"] .degraded`))
	if err != nil || !strings.HasPrefix(s, "degraded since ") {
		t.Fatalf("n1's row says %q (%v), want degraded since", s, err)
	}
	http.DefaultClient.CloseIdleConnections()
}
