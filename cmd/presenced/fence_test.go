package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
)

// SIGSTOP a node: a route lookup through it answers 503; once the others
// declared it dead, SIGCONT: its
// devices were reported offline by the others; it fences itself (its
// devices are closed with 1001), restarts as a new member and takes devices
// again; a device on another node sees no change throughout.
func TestClusterPausedNodeFences(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nodes, sam, quinn, pat := samAndTwo(ctx, t, "quinn", "pat")
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	for _, p := range subscribe(ctx, t, sam, "pat", "quinn").GetPresences() {
		if p.GetStatus() != messages.Status_online {
			t.Fatalf("snapshot: %v not online", p)
		}
	}
	events := make(chan *messages.Presence, 100)
	go readPresences(ctx, sam, events)
	patClosed := make(chan int, 1)
	go func() {
		for {
			if _, err := pat.Next(ctx); err != nil {
				patClosed <- client.CloseCode(err)
				return
			}
		}
	}()
	// next waits for pat's status at sam; quinn must never change.
	next := func(status messages.Status, within time.Duration) {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case p := <-events:
				if p.GetUser() == "quinn" {
					t.Fatalf("quinn, on n2 all along, changed: %v", p)
				}
				if p.GetStatus() == status {
					return
				}
			case <-deadline:
				t.Fatalf("pat not %v at sam within %v", status, within)
			}
		}
	}

	unreachable := ownedBy(t, n1, "n3")
	if err := n3.node.Pause(); err != nil {
		t.Fatal(err)
	}
	// A route through the stopped owner is unknown, never "no devices".
	res, err := http.Get("http://" + n1.admin + "/api/route/" + unreachable)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("route of %s, owned by the stopped n3: %d, want 503", unreachable, res.StatusCode)
	}
	waitFor(t, 15*time.Second, "n1 declares the stopped n3 dead", func() bool { return n1.memberStates()["n3"] == "dead" })
	next(messages.Status_offline, 3*time.Second) // reclaimed with gateway_down
	if err := n3.node.Resume(); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-patClosed:
		if code != 1001 {
			t.Fatalf("pat's connection to the fenced node closed with %d, want 1001", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fenced node did not close its device")
	}
	// Restarted as a new member: ready again, alive everywhere.
	waitFor(t, 10*time.Second, "n3 fencing", func() bool { return strings.Contains(n3.log(), "fenced: restarting") })
	waitFor(t, 30*time.Second, "n3 ready again", func() bool {
		res, err := http.Get("http://" + n3.admin + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	converged(t, n1, n2, n3)
	pat = n3.dial(ctx, "pat", "phone", 2)
	keepAlive(ctx, pat)
	next(messages.Status_online, 5*time.Second)
	_ = pat.Close()
	next(messages.Status_offline, 5*time.Second)
	_ = quinn
}
