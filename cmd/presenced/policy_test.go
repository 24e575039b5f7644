package main

import (
	"context"
	"testing"
	"time"

	"github.com/presence-im/presence/messages"
)

// A policy written on one node applies at once to the user's view on
// another: a viewer newly blocked is not told and gets nothing more; a
// contact still does.
func TestClusterPolicyChangeAppliesEverywhere(t *testing.T) {
	nodes, _ := startCluster(t, 2)
	n1, n2 := nodes[0], nodes[1]
	n1.settled()
	user := ownedBy(t, n1, "n2")
	n1.allow(user, "sam", "tia")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	watch := map[string]chan *messages.Presence{}
	for _, v := range []string{"sam", "tia"} {
		c := n1.dialAlive(ctx, v, "phone", 1)
		subscribe(ctx, t, c, user)
		watch[v] = make(chan *messages.Presence, 10)
		go readPresences(ctx, c, watch[v])
	}
	n1.put("/api/users/"+user+"/policy", `{"granularity":"exact","contacts":["sam","tia"],"blocked":["tia"]}`)
	dev := n2.dialAlive(ctx, user, "phone", 1)
	select {
	case p := <-watch["sam"]:
		if p.GetStatus() != messages.Status_online {
			t.Fatalf("sam got %v, want online", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sam, a contact, got nothing")
	}
	_ = dev.Close()
	<-watch["sam"] // the offline; tia's events, if any, came before it
	select {
	case p := <-watch["tia"]:
		t.Fatalf("tia, blocked, got %v", p)
	case <-time.After(500 * time.Millisecond):
	}
}
