package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
)

// The session's batched subscription turns each presence_batch into
// events, like realtime changes; Query answers once, changes no State,
// and hands over the node's refusal.
func TestSessionBatchedAndQuery(t *testing.T) {
	timing := config.Fast()
	nd := startNodeTiming(t, timing)
	for _, u := range []string{"alice", "carol"} {
		if err := nd.policies.Put(context.Background(), u, store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob"}}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bob := client.Start(ctx, client.Config{URLs: []string{nd.url()}, Token: token(t, "bob", "laptop")})
	bob.SubscribeTier(messages.Tier_batched, "alice")
	waitFor(t, 5*time.Second, "bob's snapshot of alice", func() bool { _, ok := bob.State("alice"); return ok })
	alice := client.Start(ctx, client.Config{URLs: []string{nd.url()}, Token: token(t, "alice", "phone")})
	waitFor(t, 5*time.Second, "alice online for bob, batched", func() bool {
		p, _ := bob.State("alice")
		return p.GetStatus() == messages.Status_online
	})
	ps, err := bob.Query(ctx, "alice", "carol", "dave")
	if err != nil || len(ps) != 2 {
		t.Fatalf("Query = %v, %v; want alice and carol (dave has no policy: hidden)", ps, err)
	}
	if _, ok := bob.State("carol"); ok {
		t.Fatal("a query's answer went into State")
	}
	_, err = bob.Query(ctx)
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != 400 {
		t.Fatalf("an empty query: %v, want the node's 400", err)
	}
	cancel()
	<-bob.Done()
	<-alice.Done()
}
