package chaos

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// A run leaves no goroutine behind: its devices and watchers end with
// their round.
func TestMain(m *testing.M) {
	if os.Getenv(hangEnv) != "" { // a stand-in for a node whose start-up hangs
		time.Sleep(time.Minute)
		os.Exit(3)
	}
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(), // nbio's package-level task pool
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}

// hangEnv makes this test binary, started as a node, hang without ever
// getting ready (TestStuckNodeIsDumped).
const hangEnv = "CHAOS_TEST_HANG"

// A node that runs but never gets ready is ended with SIGQUIT: its log
// ends with where each goroutine was (a start-up hang leaves no other
// trace), and the error says it was not ready.
func TestStuckNodeIsDumped(t *testing.T) {
	t.Setenv(hangEnv, "1")
	c := &Cluster{Bin: os.Args[0], Dir: t.TempDir(), NoKey: true, ReadyWithin: time.Second}
	defer c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nd, err := c.StartNode(ctx, "n1")
	if err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("start = %v, want not ready", err)
	}
	if nd.Alive() {
		t.Fatal("the stuck node still runs")
	}
	// Where goroutine 1 was depends on how far the binary got: a -race
	// build on a loaded machine can still be in its packages' init
	// (seen in CI), otherwise it is in the stand-in's sleep.
	if log := nd.Log(); !strings.Contains(log, "SIGQUIT") || !regexp.MustCompile(`goroutine 1 [^\n]*\n\S+\(`).MatchString(log) {
		t.Fatalf("log has no goroutine dump:\n%s", log)
	}
}
