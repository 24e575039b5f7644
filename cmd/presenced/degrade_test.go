package main

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
)

// Issue 25's degraded mode on three real nodes, with thresholds so tiny
// that any fan-out degrades n1: bob (the Go SDK, on n1) subscribes to
// alice and carol batched; alice coming online degrades n1, and bob is
// told to pull; carol coming online reaches him by his pulls (he still
// pulls when he sees it); once n1's fan-out has been quiet for
// --restore-after it restores push (restored, and a snapshot); in the end
// bob holds the truth, versions never having gone back.
func TestClusterDegradedMode(t *testing.T) {
	nodes, _ := startCluster(t, 3, "--degrade-at", "2us", "--degrade-below", "1us", "--restore-after", "2s",
		"--degraded-pull", "300ms", "--batch-window", "100ms")
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n1.allow("alice", "bob")
	n1.allow("carol", "bob")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	session := func(ctx context.Context, n *proc, user string) *client.Session {
		tok, _ := gateway.Tokens{Key: []byte("e2e")}.Mint(user, "phone", time.Hour)
		return client.Start(ctx, client.Config{URLs: []string{"ws://" + n.listen + "/ws"}, Token: tok})
	}
	bob := session(ctx, n1, "bob")
	var mu sync.Mutex
	versions := map[string][]uint64{}
	go func() {
		for ev := range bob.Events() {
			mu.Lock()
			p := ev.Presence
			if vs := versions[p.GetUser()]; len(vs) > 0 && (p.GetVersion() < vs[len(vs)-1] || !ev.Snapshot && p.GetVersion() == vs[len(vs)-1]) {
				t.Errorf("%s: version %d after %d (snapshot %v)", p.GetUser(), p.GetVersion(), vs[len(vs)-1], ev.Snapshot)
			}
			versions[p.GetUser()] = append(versions[p.GetUser()], p.GetVersion())
			mu.Unlock()
		}
	}()
	bob.SubscribeTier(messages.Tier_batched, "alice", "carol")
	status := func(u string) messages.Status { p, _ := bob.State(u); return p.GetStatus() }
	waitFor(t, 10*time.Second, "bob's snapshot", func() bool {
		return status("alice") == messages.Status_offline && status("carol") == messages.Status_offline
	})

	actx, leave := context.WithCancel(ctx)
	alice := session(actx, n2, "alice")
	waitFor(t, 10*time.Second, "n1 degraded, bob pulling alice and carol", func() bool {
		return slices.Equal(bob.Pulling(), []string{"alice", "carol"})
	})
	session(ctx, n3, "carol")
	waitFor(t, 10*time.Second, "bob sees carol online", func() bool { return status("carol") == messages.Status_online })
	if len(bob.Pulling()) == 0 {
		t.Fatal("carol's online came after the restore: not by a pull")
	}
	waitFor(t, 15*time.Second, "push restored", func() bool { return len(bob.Pulling()) == 0 })
	if got := n1.metric("presence_degraded_connections_total"); got < 1 {
		t.Fatalf("presence_degraded_connections_total = %v on n1", got)
	}

	// After the restore: alice leaves; bob ends with the truth, pushed or
	// pulled (this fan-out degrades n1 again: its threshold is tiny).
	leave()
	<-alice.Done()
	waitFor(t, 15*time.Second, "bob sees alice offline, carol online", func() bool {
		return status("alice") == messages.Status_offline && status("carol") == messages.Status_online
	})
}
