package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// readPresences collects the presence events a subscriber connection sees.
func readPresences(ctx context.Context, c *client.Conn, out chan<- *messages.Presence) {
	for {
		f, err := c.Next(ctx)
		if err != nil {
			close(out)
			return
		}
		if p := f.GetPresence(); p != nil {
			out <- p
		}
	}
}

// Three real nodes: a device on n2 seen by a subscriber on n1; kill -9 n2:
// the subscriber sees that device offline within the bound, and a device on
// n3 sees no change.
func TestClusterGatewayCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes, sam, dan, _ := samAndTwo(ctx, t, "dan", "eve")
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	snap := subscribe(ctx, t, sam, "dan", "eve")
	if len(snap.GetPresences()) != 2 {
		t.Fatalf("snapshot = %v, want dan and eve", snap)
	}
	for _, p := range snap.GetPresences() {
		if p.GetStatus() != messages.Status_online {
			t.Fatalf("snapshot = %v, want both online", snap)
		}
	}
	events := make(chan *messages.Presence, 100)
	go readPresences(ctx, sam, events)
	time.Sleep(time.Second) // a few renewals everywhere

	n2.kill()
	killed := time.Now()
	// min(TTL 1.5 s, failure detection) + debounce 0.2 s when dan's lease
	// lives on n1 or n3; when it lived on n2 too, the owner-crash bound:
	// failure detection + settle + debounce (GET /api/bounds).
	bound := 1700 * time.Millisecond
	if ownerBound := n1.bounds().OwnerCrashMs; ownerBound > 0 {
		bound = time.Duration(ownerBound) * time.Millisecond
	}
	slack := time.Second // process scheduling on a shared 2-core machine
	var danOff time.Duration
	deadline := time.After(bound + slack + 5*time.Second)
	for danOff == 0 {
		select {
		case p, ok := <-events:
			if !ok {
				t.Fatal("subscriber connection closed")
			}
			switch {
			case p.GetUser() == "eve":
				t.Fatalf("eve, still connected to n3, changed: %v", p)
			case p.GetUser() == "dan" && p.GetStatus() == messages.Status_offline:
				danOff = time.Since(killed)
			}
		case <-deadline:
			t.Fatalf("no offline for dan\nn1:\n%s\nn3:\n%s", n1.log(), n3.log())
		}
	}
	t.Logf("kill -9 to offline at a remote subscriber: %v (bound %v)", danOff, bound)
	if danOff > bound+slack {
		t.Fatalf("dan offline after %v, bound %v (+%v slack)", danOff, bound, slack)
	}
	// eve stays: nothing more for her for a while.
	quiet := time.After(time.Second)
	for {
		select {
		case p := <-events:
			if p.GetUser() == "eve" && p.GetStatus() != messages.Status_online {
				t.Fatalf("eve changed: %v", p)
			}
		case <-quiet:
			_ = dan
			return
		}
	}
}
