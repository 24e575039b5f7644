package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
)

// baseShrank waits until p logged a quorum base of members (the resolver
// dropped a member dead past the stable period).
func (p *proc) baseShrank(members int, within time.Duration) {
	p.t.Helper()
	want := fmt.Sprintf(` members=%d was=%d `, members, members+1)
	waitFor(p.t, within, p.name+": a quorum base of "+want, func() bool {
		for _, l := range strings.Split(p.log(), "\n") {
			if strings.Contains(l, `msg="cluster: quorum base"`) && strings.Contains(l, want) {
				return true
			}
		}
		return false
	})
}

// serves checks that p serves devices after its peers died: its device of
// before is still connected, a new one comes online, and it never fenced.
func (p *proc) serves(ctx context.Context, kept *client.Conn, user string) {
	p.t.Helper()
	if err := kept.Heartbeat(ctx, 1000); err != nil {
		p.t.Fatalf("%s's device was closed: %v", p.name, err)
	}
	c := p.dial(ctx, user, "phone", 1)
	keepAlive(ctx, c)
	p.waitOnline(user)
	if strings.Contains(p.log(), "fenced") {
		p.t.Fatalf("%s fenced:\n%s", p.name, p.log())
	}
}

// 3 nodes: kill -9 n3; once n1 dropped it from its quorum base (stable
// period), kill -9 n2: n1, the oldest, wins the 1-of-2 tie and serves on.
func TestClusterSequentialCrashes(t *testing.T) {
	t.Parallel() // its own nodes; waits, mostly (make test's time)
	ctx, n1, n2, n3, sam := threeWithSamOnN1(t)

	n3.kill()
	n1.baseShrank(2, 30*time.Second)
	n2.kill()
	n1.baseShrank(1, 30*time.Second)
	n1.serves(ctx, sam, "ann")
}

// 2 nodes: the younger one's death leaves the oldest serving; the oldest's
// death fences the younger, which waits (one log line per back-off step)
// until an operator tells it to serve alone with the admin token.
func TestClusterTwoNodes(t *testing.T) {
	t.Parallel() // its own nodes; waits, mostly (make test's time)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	t.Run("the younger dies", func(t *testing.T) {
		nodes, _ := startCluster(t, 2)
		n1, n2 := nodes[0], nodes[1]
		sam := n1.dial(ctx, "sam", "phone", 1)
		keepAlive(ctx, sam)
		n1.waitOnline("sam")
		n2.kill()
		n1.baseShrank(1, 30*time.Second)
		n1.serves(ctx, sam, "ann")
	})
	t.Run("the oldest dies", func(t *testing.T) {
		db := "sqlite:" + filepath.Join(t.TempDir(), "presence.db")
		n1 := startProc(t, "n1", "--policy-dsn", db)
		n2 := startProc(t, "n2", "--policy-dsn", db, "--join", n1.gossip, "--admin-token", "tok")
		converged(t, n1, n2)
		n1.kill()
		waitFor(t, 20*time.Second, "n2 fences", func() bool { return strings.Contains(n2.log(), "fenced: restarting") })
		waitFor(t, 20*time.Second, "n2 waits, fenced", func() bool {
			var f struct{ Fenced bool }
			return n2.getJSON("/api/fence", &f) == 200 && f.Fenced
		})
		waiting := time.Now()
		time.Sleep(4 * time.Second) // how many lines does waiting log?
		if tries := strings.Count(n2.log(), "not serving yet"); tries > 4 {
			t.Fatalf("%d retry lines in %v: more than one per back-off step (1, 2, 4 s)", tries, time.Since(waiting))
		}
		if code := post(t, n2, "/api/fence/serve-alone", ""); code != http.StatusUnauthorized {
			t.Fatalf("serve-alone without the token: %d, want 401", code)
		}
		if code := post(t, n2, "/api/fence/serve-alone", "tok"); code != http.StatusAccepted {
			t.Fatalf("serve-alone: %d, want 202", code)
		}
		waitFor(t, 20*time.Second, "n2 ready", func() bool { return n2.getJSON("/readyz", nil) == 200 })
		c := n2.dial(ctx, "ann", "phone", 1)
		keepAlive(ctx, c)
		n2.waitOnline("ann")
	})
}

// 2 nodes: the oldest dies and the younger fences; the oldest starts again
// on its address: the fenced one, whose seed is a host name (resolved again
// on every try), finds it and both serve as one cluster.
func TestClusterFencedNodeRejoinsThroughItsSeeds(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "presence.db")
	n1 := startProc(t, "n1", "--policy-dsn", db)
	_, port, _ := net.SplitHostPort(n1.gossip)
	n2 := startProc(t, "n2", "--policy-dsn", db, "--join", "localhost:"+port)
	converged(t, n1, n2)
	n1.kill()
	waitFor(t, 20*time.Second, "n2 waits, fenced", func() bool {
		var f struct{ Fenced bool }
		return n2.getJSON("/api/fence", &f) == 200 && f.Fenced
	})
	n1 = startProcAt(t, n1, "--policy-dsn", db)
	// The back-off doubles from 1 s up to 15 s.
	waitFor(t, 30*time.Second, "n2 ready again", func() bool { return n2.getJSON("/readyz", nil) == 200 })
	converged(t, n1, n2)
}

func post(t *testing.T, p *proc, path, token string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+p.admin+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// The README's tour: kill -9 n2; after the stable period SIGSTOP n3 past
// its death: n1, the oldest, serves on alone; SIGCONT: n3 fences and
// rejoins n1.
func TestClusterTourKillThenPause(t *testing.T) {
	t.Parallel() // its own nodes; waits, mostly (make test's time)
	ctx, n1, n2, n3, sam := threeWithSamOnN1(t)
	n2.kill()
	n1.baseShrank(2, 30*time.Second)
	if err := n3.node.Pause(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "n1 declares the stopped n3 dead", func() bool { return n1.memberStates()["n3"] == "dead" })
	if err := n3.node.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "n3 fencing", func() bool { return strings.Contains(n3.log(), "fenced: restarting") })
	waitFor(t, 30*time.Second, "n3 ready again", func() bool { return n3.getJSON("/readyz", nil) == 200 })
	converged(t, n1, n3)
	n1.serves(ctx, sam, "ann")
}

// 2 nodes: the oldest is paused, and the younger dies meanwhile. Resumed,
// the oldest fences (it was paused), finds nobody, and once the stable
// period has passed since fencing it wins the tie of its base alone and
// serves as a new cluster, without an operator.
func TestClusterFencedOldestServesAsNewCluster(t *testing.T) {
	t.Parallel() // its own nodes; waits, mostly (make test's time)
	db := "sqlite:" + filepath.Join(t.TempDir(), "presence.db")
	n1 := startProc(t, "n1", "--policy-dsn", db)
	n2 := startProc(t, "n2", "--policy-dsn", db, "--join", n1.gossip)
	converged(t, n1, n2)
	// n1 stays stopped for twice the failure detection at least, so its
	// pause is past what anyone needs to declare it dead: resumed sooner
	// (n2 can fence in about a second), it would rightly keep serving as
	// the tie's winner without fencing, which is not this test's path.
	hold := 2 * time.Duration(n1.bounds().Timing.FailureDetectionMs) * time.Millisecond
	pausedAt := time.Now()
	if err := n1.node.Pause(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "n2 fences (it lost the tie)", func() bool { return strings.Contains(n2.log(), "fenced: restarting") })
	n2.kill()
	<-time.After(time.Until(pausedAt.Add(hold)))
	if err := n1.node.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "n1 fences (paused)", func() bool { return strings.Contains(n1.log(), "fenced: restarting") })
	waitFor(t, 40*time.Second, "n1 serves again", func() bool { return n1.getJSON("/readyz", nil) == 200 })
	if !strings.Contains(n1.log(), "rejoined: the split-brain resolver lets this node serve") {
		t.Fatalf("n1 serves without the resolver's word:\n%s", n1.log())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := n1.dial(ctx, "ann", "phone", 1)
	keepAlive(ctx, c)
	n1.waitOnline("ann")
}

// The lease strategy: 3 nodes sharing one SQLite file, --split-brain
// lease. kill -9 n1 and n2 at once: n3, the youngest (the majority rule
// would fence it), takes the lease, serves its device on and a new one, and
// drops the dead from its quorum base after the stable period.
func TestClusterLeaseSurvivorOfTwoAtOnce(t *testing.T) {
	t.Parallel() // its own nodes; waits, mostly (make test's time)
	db := "sqlite:" + filepath.Join(t.TempDir(), "presence.db")
	n1 := startProc(t, "n1", "--policy-dsn", db, "--split-brain", "lease")
	n2 := startProc(t, "n2", "--policy-dsn", db, "--split-brain", "lease", "--join", n1.gossip)
	n3 := startProc(t, "n3", "--policy-dsn", db, "--split-brain", "lease", "--join", n1.gossip)
	converged(t, n1, n2, n3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sam := n3.dial(ctx, "sam", "phone", 1)
	keepAlive(ctx, sam)
	n3.waitOnline("sam")

	done := make(chan struct{})
	go func() { n1.kill(); close(done) }()
	n2.kill()
	<-done
	logged := func(parts ...string) func() bool {
		return func() bool {
			for _, l := range strings.Split(n3.log(), "\n") {
				if strings.Contains(l, parts[0]) && strings.Contains(l, parts[1]) {
					return true
				}
			}
			return false
		}
	}
	waitFor(t, 30*time.Second, "n3 holds the lease", logged(`msg="cluster: split-brain lease"`, "holder=n3"))
	waitFor(t, 30*time.Second, "n3's quorum base down to itself", logged(`msg="cluster: quorum base"`, " members=1 was="))
	n3.serves(ctx, sam, "ann")
}

// The lease strategy on 2 nodes: the oldest dies (the majority rule would
// fence the younger and wait for an operator, TestClusterTwoNodes): the
// younger takes the lease and serves on, its device kept and a new one
// online, never fenced.
func TestClusterLeaseTwoNodesTheOldestDies(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "presence.db")
	n1 := startProc(t, "n1", "--policy-dsn", db, "--split-brain", "lease")
	n2 := startProc(t, "n2", "--policy-dsn", db, "--split-brain", "lease", "--join", n1.gossip)
	converged(t, n1, n2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sam := n2.dial(ctx, "sam", "phone", 1)
	keepAlive(ctx, sam)
	n2.waitOnline("sam")
	n1.kill()
	waitFor(t, 30*time.Second, "n2 holds the lease", func() bool {
		for _, l := range strings.Split(n2.log(), "\n") {
			if strings.Contains(l, `msg="cluster: split-brain lease"`) && strings.Contains(l, "holder=n2") {
				return true
			}
		}
		return false
	})
	n2.baseShrank(1, 30*time.Second)
	n2.serves(ctx, sam, "ann")
}

// threeWithSamOnN1 starts a 3-node cluster with sam's phone online through
// n1, kept alive until the test ends (90 s at most).
func threeWithSamOnN1(t *testing.T) (context.Context, *proc, *proc, *proc, *client.Conn) {
	t.Helper()
	nodes, _ := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	sam := nodes[0].dial(ctx, "sam", "phone", 1)
	keepAlive(ctx, sam)
	nodes[0].waitOnline("sam")
	return ctx, nodes[0], nodes[1], nodes[2], sam
}
