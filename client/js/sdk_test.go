package js_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdk "github.com/presence-im/presence/client/js"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}

// browse starts headless Chromium (`make tools` installs it) for the
// test, ended with it. Its hidden tabs' timers are slowed down as in a
// browser people use (chromedp's defaults turn that off).
func browse(t *testing.T, within time.Duration) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("no chromium: `make tools` installs Debian's chromium")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1100, 900),
		chromedp.Flag("disable-background-timer-throttling", false), chromedp.Flag("disable-backgrounding-occluded-windows", false),
		chromedp.Flag("disable-renderer-backgrounding", false))...)
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelT := context.WithTimeout(ctx, within)
	t.Cleanup(func() { cancelT(); cancel(); cancelAlloc() })
	return ctx
}

// The module's pure parts (versions as BigInt, back-off and its full
// jitter, heartbeat delay and silence, the attempt in localStorage,
// the rules on ids, targets and status) and the client against a fake
// WebSocket (frames, the version rule, every close code, failover, token
// refresh, degraded mode's pulls and restore), each a module of testdata
// run in the browser.
func TestSDKInBrowser(t *testing.T) {
	srv := testServer(t)
	ctx := browse(t, 40*time.Second)
	if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	for _, mod := range []string{"unit.js", "fake.js"} {
		fails, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`import("/testdata/`+mod+`").then((m) => m.run())`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v", mod, err)
		}
		for _, f := range fails {
			t.Errorf("%s: %s", mod, f)
		}
	}
}

// testServer serves presence.js, testdata/ and an empty page at /, and at
// /csp one whose Content-Security-Policy forbids workers.
func testServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /presence.js", http.FileServerFS(sdk.Files))
	mux.Handle("GET /testdata/", http.FileServer(http.Dir(".")))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("<!doctype html><title>sdk tests</title>"))
	})
	mux.HandleFunc("GET /csp", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; worker-src 'none'")
		w.Write([]byte("<!doctype html><title>no workers</title>"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv
}

// eval runs a JavaScript expression in the tab, awaiting a promise, and
// decodes its value into a T.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// A page whose Content-Security-Policy forbids workers (no worker-src
// blob:; Chrome tells the Worker's error later): a timer set before that
// fires on the page's timers, and the client heartbeats on them.
func TestTimersWithoutWorkers(t *testing.T) {
	srv := testServer(t)
	ctx := browse(t, 20*time.Second)
	if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/csp")); err != nil {
		t.Fatal(err)
	}
	if !eval[bool](t, ctx, `import("/testdata/pages.js").then((m) => m.firstTimer())`) {
		t.Fatal("a timer set before the Worker failed never fired")
	}
	gaps := eval[[]float64](t, ctx, `import("/testdata/pages.js").then((m) => { m.startBeating();
		return new Promise((ok) => { const f = () => { const b = m.beats(0).worker; b.gaps.length >= 5 ? (m.stopBeating(), ok(b.gaps)) : setTimeout(f, 20); }; f(); }); })`)
	if slices.Min(gaps) < 94 || slices.Max(gaps) > 300 {
		t.Errorf("heartbeats with the page's timers: gaps %v ms, want about 95", gaps)
	}
}

// Two tabs of one browser share the attempt (localStorage): dialing at
// the same time, as fast as they can, no attempt is drawn twice and each
// tab's grow.
func TestAttemptsOfTwoTabs(t *testing.T) {
	srv := testServer(t)
	ctx := browse(t, 40*time.Second)
	if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/")); err != nil { // the browser starts here
		t.Fatal(err)
	}
	other, cancel := chromedp.NewContext(ctx) // a tab of the same browser
	defer cancel()
	if _, err := chromedp.Run(other, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	tabs := []context.Context{ctx, other}
	const dials = 150
	got := make([][]int64, len(tabs))
	var wg sync.WaitGroup
	for i, tab := range tabs {
		wg.Go(func() {
			v, err := chromedp.Run(tab, chromedp.Evaluate[[]int64](
				fmt.Sprintf(`import("/testdata/pages.js").then((m) => m.dialAttempts(%d, "tabs.attempt"))`, dials), chromedp.EvalAwaitPromise))
			if err != nil {
				t.Errorf("tab %d: %v", i, err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	seen := map[int64]int{}
	for i, as := range got {
		if len(as) != dials {
			t.Fatalf("tab %d dialed %d times, want %d", i, len(as), dials)
		}
		for j, a := range as {
			if j > 0 && a <= as[j-1] {
				t.Errorf("tab %d: attempt %d after %d", i, a, as[j-1])
			}
			if k, ok := seen[a]; ok {
				t.Errorf("attempt %d drawn by tab %d and tab %d", a, k, i)
			}
			seen[a] = i
		}
	}
	// a tab sees the other's localStorage writes later: within a second
	want := strconv.FormatInt(max(got[0][dials-1], got[1][dials-1]), 10)
	stored := eval[string](t, ctx, `new Promise((ok) => { const end = Date.now() + 1000;
		const f = () => { const v = localStorage.getItem("tabs.attempt"); v === "`+want+`" || Date.now() > end ? ok(v) : setTimeout(f, 10); }; f(); })`)
	if stored != want {
		t.Errorf("localStorage holds %s, want the last attempt, %s", stored, want)
	}
}

// A hidden tab: the page's timers run once a second (Chrome), so a
// client on them heartbeats late; the client's timers run in a Worker
// and keep the hello's interval. Hidden, it declares background; visible
// again, active.
func TestHiddenTab(t *testing.T) {
	srv := testServer(t)
	ctx := browse(t, 40*time.Second)
	if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	eval[bool](t, ctx, `import("/testdata/pages.js").then((m) => { window.pages = m; m.startBeating(); return true; })`)
	other, cancel := chromedp.NewContext(ctx, chromedp.WithNewWindow(false)) // a tab in front of it
	if _, err := chromedp.Run(other, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	since := eval[float64](t, ctx, `new Promise((ok) => { const f = () => document.hidden ? ok(performance.now()) : setTimeout(f, 10); f(); })`)
	type client struct {
		Gaps       []float64
		Activities []string
		Activity   string
	}
	var r struct {
		Hidden       bool
		Worker, Page client
	}
	for deadline := time.Now().Add(10 * time.Second); len(r.Page.Gaps) < 3; time.Sleep(100 * time.Millisecond) {
		r = eval[struct {
			Hidden       bool
			Worker, Page client
		}](t, ctx, fmt.Sprintf(`pages.beats(%f)`, since))
		if time.Now().After(deadline) {
			t.Fatalf("the page's timers: %v in 10 s", r.Page.Gaps)
		}
	}
	t.Logf("hidden: heartbeat gaps of the worker's timers %v ms, of the page's %v ms", r.Worker.Gaps, r.Page.Gaps)
	if slices.Min(r.Page.Gaps) < 500 {
		t.Fatalf("the page's timers are not slowed down in the hidden tab (gaps %v ms): the test shows nothing", r.Page.Gaps)
	}
	if len(r.Worker.Gaps) < 20 || slices.Max(r.Worker.Gaps) > 300 {
		t.Errorf("heartbeats in the hidden tab, every 95 ms wanted: gaps %v ms", r.Worker.Gaps)
	}
	for name, c := range map[string]client{"worker": r.Worker, "page": r.Page} {
		if !r.Hidden || c.Activity != "background" || !slices.Contains(c.Activities, "background") {
			t.Errorf("%s: hidden %v, activity %q, sent %v: want background", name, r.Hidden, c.Activity, c.Activities)
		}
	}
	cancel() // the tab in front closes
	eval[bool](t, ctx, `new Promise((ok) => { const f = () => pages.beats(0).worker.activity === "active" ? ok(true) : setTimeout(f, 10); f(); })`)
	eval[bool](t, ctx, `(pages.stopBeating(), true)`)
}

// screenshot writes a PNG of the page to $PRESENCE_SCREENSHOTS (make test
// sets bin/screenshots), as the dashboard's tests do, or to the test's
// temporary directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("PRESENCE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
