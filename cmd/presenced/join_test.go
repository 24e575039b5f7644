package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
)

// A fourth node joining moves identities to it: subscribers see no false
// offline and no version going back, and every departure afterwards still
// reaches them.
func TestClusterJoinIsInvisible(t *testing.T) {
	t.Parallel() // its own nodes; waits, mostly (make test's time)
	nodes, db := startCluster(t, 3)
	n1 := nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const users = 12
	var targets []string
	devices := map[string]*client.Conn{}
	for i := range users {
		u := fmt.Sprintf("u%02d", i)
		targets = append(targets, u)
		n1.allow(u, "sam")
		devices[u] = nodes[i%3].dialAlive(ctx, u, "phone", 1)
	}
	sam := n1.dialAlive(ctx, "sam", "phone", 1)
	n1.waitOnline(targets...)
	snap := subscribe(ctx, t, sam, targets...)
	last := map[string]uint64{}
	for _, p := range snap.GetPresences() {
		if p.GetStatus() != messages.Status_online {
			t.Fatalf("snapshot: %v not online", p)
		}
		last[p.GetUser()] = p.GetVersion()
	}
	if len(last) != users {
		t.Fatalf("snapshot has %d users, want %d", len(last), users)
	}
	events := make(chan *messages.Presence, 1000)
	go readPresences(ctx, sam, events)
	check := func(p *messages.Presence) {
		if p.GetVersion() <= last[p.GetUser()] {
			t.Fatalf("%s: version %d after %d", p.GetUser(), p.GetVersion(), last[p.GetUser()])
		}
		last[p.GetUser()] = p.GetVersion()
	}

	startProc(t, "n4", "--policy-dsn", db, "--join", n1.gossip)
	// Through the re-registers and a settle window (fast: under 1 s) and more.
	quiet := time.After(4 * time.Second)
	for done := false; !done; {
		select {
		case p := <-events:
			check(p)
			if p.GetStatus() != messages.Status_online {
				t.Fatalf("false %v for %s after the join", p.GetStatus(), p.GetUser())
			}
		case <-quiet:
			done = true
		}
	}
	// Departures after the join still reach the subscriber, whichever node
	// each view moved to.
	for _, c := range devices {
		_ = c.Close()
	}
	gone := map[string]bool{}
	deadline := time.After(5 * time.Second)
	for len(gone) < users {
		select {
		case p := <-events:
			check(p)
			if p.GetStatus() == messages.Status_offline {
				gone[p.GetUser()] = true
			}
		case <-deadline:
			t.Fatalf("departures seen for %d of %d users: %v", len(gone), users, gone)
		}
	}
}
