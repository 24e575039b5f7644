package dashboard_test

import (
	"context"
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
