package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
)

// ownedBy returns a user whose view and whose phone's lease both live on
// member id, by proto.actor's rendezvous hashing over the members' actor
// addresses as p reports them.
func ownedBy(t *testing.T, p *proc, id string) string {
	t.Helper()
	var c admin.Cluster
	if code := p.getJSON("/api/cluster", &c); code != http.StatusOK {
		t.Fatalf("%s /api/cluster: %d", p.name, code)
	}
	var members []cluster.Placed
	target := ""
	for _, m := range c.Members {
		members = append(members, cluster.Placed{Actor: m.Addresses[1], Kinds: []string{"lease", "view"}})
		if m.ID == id {
			target = m.Addresses[1]
		}
	}
	place := cluster.NewRendezvous(members)
	for i := range 1000 {
		u := fmt.Sprintf("o%d", i)
		if place.Owner("view", u) == target && place.Owner("lease", u+"/phone") == target {
			return u
		}
	}
	t.Fatalf("no user owned by %s", id)
	return ""
}

// kill -9 the node that hosts a user's view and lease while the user's
// device stays connected to another node: the subscriber sees no offline;
// a stale handshake is still refused (the attempt floor survived); a later
// departure is still reported.
func TestClusterOwnerCrash(t *testing.T) {
	t.Parallel() // its own nodes; waits, mostly (make test's time)
	nodes, _ := startCluster(t, 3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	user := ownedBy(t, n1, "n3")
	n1.put("/api/users/"+user+"/policy", `{"granularity":"exact","contacts":["sam"]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sam := n1.dial(ctx, "sam", "phone", 1)
	dev := n2.dial(ctx, user, "phone", 5)
	keepAlive(ctx, sam)
	keepAlive(ctx, dev)
	n1.waitOnline(user)
	snap := subscribe(ctx, t, sam, user)
	if ps := snap.GetPresences(); len(ps) != 1 || ps[0].GetStatus() != messages.Status_online {
		t.Fatalf("snapshot %v", snap)
	}
	last := snap.GetPresences()[0].GetVersion()
	events := make(chan *messages.Presence, 100)
	go readPresences(ctx, sam, events)

	n3.kill()
	// Through detection, re-registers and the settle window, and beyond.
	quiet := time.After(time.Duration(n1.bounds().OwnerCrashMs)*time.Millisecond + time.Second)
	for done := false; !done; {
		select {
		case p := <-events:
			if p.GetStatus() != messages.Status_online || p.GetVersion() <= last {
				t.Fatalf("after the owner's crash: %v (last version %d)", p, last)
			}
			last = p.GetVersion()
		case <-quiet:
			done = true
		}
	}
	// The attempt floor came back with the re-created lease.
	tok, _ := gateway.Tokens{Key: []byte("e2e")}.Mint(user, "phone", time.Hour)
	_, err := client.Dial(ctx, "ws://"+n1.listen+"/ws", client.DialOptions{Token: tok, Attempt: 3})
	var he *client.HandshakeError
	if !errors.As(err, &he) || he.Status != 409 {
		t.Fatalf("stale handshake (attempt 3 after 5) after the owner's crash: %v, want 409", err)
	}
	_ = dev.Close()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case p := <-events:
			if p.GetVersion() <= last {
				t.Fatalf("version %d after %d", p.GetVersion(), last)
			}
			if p.GetStatus() == messages.Status_offline {
				return
			}
		case <-deadline:
			t.Fatal("the departure after the owner's crash was not reported")
		}
	}
}
