package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/gateway"
)

// The device limit is per user across the cluster (the user's one view
// counts): with --max-devices 2, a third device of the user is 403 on any
// node while two are online on others, and nothing is written for it; a
// batch over --max-batch is 413. Three real nodes.
func TestClusterLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := sqliteDSN(t)
	limits := []string{"--policy-dsn", db, "--max-devices", "2", "--max-batch", "5"}
	nodes := []*proc{startProc(t, "n1", limits...)}
	for i := 2; i <= 3; i++ {
		nodes = append(nodes, startProc(t, fmt.Sprintf("n%d", i), append(limits, "--join", nodes[0].gossip)...))
	}
	converged(t, nodes...)
	nodes[0].settled()
	nodes[0].dialAlive(ctx, "alice", "phone", 1)
	nodes[1].dialAlive(ctx, "alice", "laptop", 1)
	devices := func() int {
		var st struct{ Devices []any }
		nodes[2].getJSON("/api/presence/alice", &st)
		return len(st.Devices)
	}
	waitFor(t, 10*time.Second, "alice's two devices online", func() bool { return devices() == 2 })
	tok, _ := gateway.Tokens{Key: []byte("e2e")}.Mint("alice", "tablet", time.Hour)
	_, err := client.Dial(ctx, "ws://"+nodes[2].listen+"/ws", client.DialOptions{Token: tok, Attempt: 1})
	var he *client.HandshakeError
	if !errors.As(err, &he) || he.Status != http.StatusForbidden {
		t.Fatalf("alice's third device on n3 = %v, want 403", err)
	}
	if n := devices(); n != 2 {
		t.Fatalf("alice has %d devices after a refused one, want 2", n)
	}
	req, _ := http.NewRequest("POST", "http://"+nodes[2].admin+"/api/presence/batch", strings.NewReader(`{"users":["a","b","c","d","e","f"]}`))
	nodes[2].authorize(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a batch of 6 with --max-batch 5 = %d, want 413", res.StatusCode)
	}
}
