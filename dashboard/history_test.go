package dashboard_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus"
)

// screenshotDir is where the browser tests write their screenshots:
// $PRESENCE_SCREENSHOTS, or the test's temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("PRESENCE_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// A page opened after the facts shows them from GET /api/history: a
// member's death (fed to the history as gossip reports it: this node is
// alone) in the timeline and the events, a device's offline as a dot on
// the latency chart against its bound, and the series drawn from polls.
func TestDashboardShowsHistory(t *testing.T) {
	reg := prometheus.NewRegistry()
	timing := config.Fast()
	n, err := actors.Start(actors.Deps{NodeID: "n1", Timing: timing, Seed: 1, Policies: store.NewMemoryPolicies(),
		History: store.NewMemoryHistory(), Metrics: actors.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	hist := admin.NewRecorder(0)
	runCtx, stopHistory := context.WithCancel(context.Background())
	historyDone := make(chan struct{})
	go func() { hist.Run(runCtx, n); close(historyDone) }()
	api := &admin.Server{Node: n, Members: cluster.Single{Member: cluster.Member{ID: "n1", State: cluster.Alive, Since: time.Now()}},
		Timing: timing, Policies: store.NewMemoryPolicies(), Gatherer: reg, Recorder: hist}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		stopHistory()
		<-historyDone
		n.Stop()
		time.Sleep(1100 * time.Millisecond) // proto.actor's dead-letter throttle goroutine
	})

	// Before the page opens: n2 dies, alice comes and goes.
	hist.Add(admin.Event{Kind: "member", Node: "n1", AtMs: time.Now().UnixMilli(), Member: "n2", Reason: "alive"})
	hist.Add(admin.Event{Kind: "member", Node: "n1", AtMs: time.Now().UnixMilli(), Member: "n2", Reason: "dead"})
	c, err := n.Gateway().Open(context.Background(), actors.OpenRequest{User: "alice", Device: "phone", Attempt: 1, ConnID: "c1", Socket: nopSocket{}})
	if err != nil {
		t.Fatal(err)
	}
	c.Closed()
	deadline := time.Now().Add(10 * time.Second)
	for !hasOffline(hist.Snapshot()) {
		if time.Now().After(deadline) {
			t.Fatalf("no published offline in the history within 10 s: %+v", hist.Snapshot().Events)
		}
		time.Sleep(20 * time.Millisecond)
	}

	ctx := browse(t)
	run := func(a chromedp.Action[chromedp.Void]) {
		t.Helper()
		if _, err := chromedp.Run(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	run(chromedp.Navigate(srv.URL + "/"))
	run(chromedp.WaitVisible(`#timeline tbody tr[data-member="n2"]`))
	timeline, err := chromedp.Run(ctx, chromedp.Text(`#timeline tbody tr[data-member="n2"]`))
	if err != nil || !strings.Contains(timeline, "alive") || !strings.Contains(timeline, "dead") {
		t.Fatalf("n2's timeline %q (%v), want alive then dead", timeline, err)
	}
	run(chromedp.WaitVisible(`#events tbody tr[data-kind="member"]`))
	run(chromedp.WaitVisible(`#latency circle.dot`))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('#series polyline[data-series="connections"]')?.dataset.points >= 2`)); err != nil {
		t.Fatalf("series: %v", err)
	}
	dots, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#latency circle.dot").length`))
	if err != nil || dots != 1 {
		t.Fatalf("%d latency dots (%v), want alice's one", dots, err)
	}
	shoot(t, ctx, "dashboard-history.png")

	// The user's graph, live: a device on, then gone.
	c2, err := n.Gateway().Open(context.Background(), actors.OpenRequest{User: "alice", Device: "laptop", Attempt: 1, ConnID: "c2", Socket: nopSocket{}})
	if err != nil {
		t.Fatal(err)
	}
	run(chromedp.SendKeys(`#user`, "alice"))
	run(chromedp.Click(`#lookup button`))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#graph").dataset.devices === "1"`)); err != nil {
		t.Fatalf("graph with alice's laptop: %v", err)
	}
	graph, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#graph").textContent`))
	if err != nil || !strings.Contains(graph, "connection laptop on n1") || !strings.Contains(graph, "lease on n1") || !strings.Contains(graph, "view on n1: online") {
		t.Fatalf("graph %q (%v)", graph, err)
	}
	shoot(t, ctx, "dashboard-user.png")
	c2.Closed()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#graph").textContent.includes("view on n1: offline")`)); err != nil {
		t.Fatalf("graph after the laptop left: %v", err)
	}
	if d, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#graph").dataset.devices`)); d != "0" {
		t.Fatalf("graph lists %s devices after the laptop left, want 0", d)
	}
}

func hasOffline(s admin.Snapshot) bool {
	for _, ev := range s.Events {
		if ev.Kind == "published" && ev.Status == "offline" && ev.Reason == actors.ModeClose {
			return true
		}
	}
	return false
}

// browse starts a headless browser for the test.
func browse(t *testing.T) context.Context {
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser(t)), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 1600))...)
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() { cancelT(); cancel(); cancelAlloc() })
	return ctx
}

// shoot writes a full-page PNG screenshot (quality 100: lower is a JPEG) for a reviewer to look at.
func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(screenshotDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
