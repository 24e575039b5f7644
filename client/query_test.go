package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// A subscribe of 1000 ids of 128 characters (131 KB of JSON, over the
// node's 64 KiB message limit) goes in requests that fit: the node keeps
// the connection and answers each (alice, at the end, is in the last);
// a query as large is refused before it is sent, naming the rule.
func TestSessionSplitsWhatAMessageCannotHold(t *testing.T) {
	nd := startNodeTiming(t, config.Fast())
	if err := nd.policies.Put(context.Background(), "alice", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob"}}); err != nil {
		t.Fatal(err)
	}
	var long []string
	for i := range 999 {
		long = append(long, fmt.Sprintf("%04d", i)+strings.Repeat("x", 124))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bob := client.Start(ctx, client.Config{URLs: []string{nd.url()}, Token: token(t, "bob", "laptop")})
	waitFor(t, 5*time.Second, "connected", func() bool { return bob.Hello() != nil })
	bob.Subscribe(append(long, "alice")...)
	waitFor(t, 5*time.Second, "bob's snapshot of alice", func() bool { _, ok := bob.State("alice"); return ok })
	_, err := bob.Query(ctx, append(long, "alice")...)
	if !errors.Is(err, client.ErrTooLarge) || !strings.Contains(err.Error(), "a message is at most 65536 bytes (the node closes a larger one with 1009)") {
		t.Fatalf("a query of 131 KB: %v, want ErrTooLarge naming the rule", err)
	}
	if n := bob.Connections(); n != 1 {
		t.Fatalf("%d connections: the node closed one", n)
	}
	cancel()
	<-bob.Done()
}
