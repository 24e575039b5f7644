package js_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
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
// test, ended with it.
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
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1100, 900))...)
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
	mux := http.NewServeMux()
	mux.Handle("GET /presence.js", http.FileServerFS(sdk.Files))
	mux.Handle("GET /testdata/", http.FileServer(http.Dir(".")))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("<!doctype html><title>sdk tests</title>"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
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
	srv.CloseClientConnections()
}

// screenshot writes a PNG of the page to $SCREENSHOT_DIR, or to the
// test's temporary directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
