package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/internal/poll"
	"go.uber.org/goleak"
)

// A run leaves no goroutine behind: its devices and watchers end with
// their round.
func TestMain(m *testing.M) {
	if os.Getenv(orphanEnv) != "" { // a harness that dies with its node running
		startAndDie(os.Getenv(orphanEnv))
	}
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

// orphanEnv makes this test binary a harness that starts a node (this
// binary again, hanging) in the directory it names, prints the node's pid
// and exits without stopping it (TestNodesDieWithTheirHarness).
const orphanEnv = "CHAOS_TEST_ORPHAN"

func startAndDie(dir string) {
	os.Unsetenv(orphanEnv)
	os.Setenv(hangEnv, "1")
	c := &Cluster{Bin: os.Args[0], Dir: dir, NoKey: true}
	r, err := c.startProcess(&Node{ID: "orphan"}, nil)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println(r.(*process).cmd.Process.Pid)
	os.Exit(0)
}

// A harness that dies without stopping its nodes (killed, or a test
// binary at its timeout) takes them with it: none is left running.
func TestNodesDieWithTheirHarness(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), orphanEnv+"="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("harness: %v: %s", err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("harness printed %q", out)
	}
	// Gone, or a zombie nobody reaps (the reparenting init of a
	// container may not): either way no longer running.
	poll.Until(t, 10*time.Second, 20*time.Millisecond, fmt.Sprintf("node %d gone with its harness", pid), func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		s := string(b)
		return strings.HasPrefix(s[strings.LastIndexByte(s, ')')+2:], "Z")
	})
}

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
