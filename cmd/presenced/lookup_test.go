package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/messages"
)

// Admin lookups of users nobody has seen leave no view behind in a
// cluster: each view they activate, on whichever member owns it, stops
// once it has answered, long before --idle (1 min here); lookups of a known
// user answer right and leave its view.
func TestClusterLookupsOfUnknownUsersLeaveNoView(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := sqliteDSN(t)
	nodes := []*proc{startProc(t, "n1", "--policy-dsn", db, "--idle", "1m")}
	for i := 2; i <= 3; i++ {
		nodes = append(nodes, startProc(t, fmt.Sprintf("n%d", i), "--policy-dsn", db, "--idle", "1m", "--join", nodes[0].gossip))
	}
	converged(t, nodes...)
	nodes[0].settled()
	nodes[1].dialAlive(ctx, "alice", "phone", 1)
	nodes[0].waitOnline("alice")
	views := func() int {
		var c admin.Cluster
		nodes[0].getJSON("/api/cluster", &c)
		total := 0
		for _, byKind := range c.Actors {
			total += byKind["view"]
		}
		return total
	}
	baseline := views()
	var users []string
	for i, p := range nodes {
		for j := range 100 {
			u := fmt.Sprintf("ghost-%d-%d", i, j)
			users = append(users, `"`+u+`"`)
			var st struct{ Status string }
			if code := p.getJSON("/api/presence/"+u, &st); code != 200 || st.Status != "offline" {
				t.Fatalf("%s: %s = %d %s, want 200 offline", p.name, u, code, st.Status)
			}
		}
	}
	req, _ := http.NewRequest("POST", "http://"+nodes[2].admin+"/api/presence/batch", strings.NewReader(`{"users":[`+strings.Join(users, ",")+`]}`))
	nodes[2].authorize(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("batch: %v %v", res, err)
	}
	res.Body.Close()
	waitFor(t, 5*time.Second, fmt.Sprintf("views back to %d", baseline), func() bool { return views() == baseline })
	for _, p := range nodes {
		var st struct{ Status string }
		if p.getJSON("/api/presence/alice", &st); st.Status != "online" {
			t.Fatalf("%s: alice = %s, want online", p.name, st.Status)
		}
	}
	if v := views(); v != baseline {
		t.Fatalf("views = %d after looking up a known user, want %d", v, baseline)
	}
}

// A query from a device on n1 for users whose views live on n2 and n3
// answers once (the one bob may see; the other absent) and leaves
// nothing: no subscription on n1, and the views it woke on n2 and n3
// passivate (presence_actor_passivations_total), their counts back to
// what they were.
func TestClusterQueryLeavesNothing(t *testing.T) {
	t.Parallel() // its own nodes; waits, mostly (make test's time)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes, _ := startCluster(t, 3, "--idle", "2s")
	nodes[0].settled()
	known, hidden := ownedBy(t, nodes[0], "n2"), ownedBy(t, nodes[0], "n3")
	nodes[0].allow(known, "bob")
	bob := nodes[0].dialAlive(ctx, "bob", "phone", 1)
	nodes[0].waitOnline("bob")
	views := func() map[string]int {
		var c admin.Cluster
		nodes[0].getJSON("/api/cluster", &c)
		out := map[string]int{}
		for id, byKind := range c.Actors {
			out[id] = byKind["view"]
		}
		return out
	}
	total := func(m map[string]int) int {
		n := 0
		for _, v := range m {
			n += v
		}
		return n
	}
	// known's view, woken by its policy, passivates: bob's alone is left.
	waitFor(t, 15*time.Second, "bob's view alone", func() bool { return total(views()) == 1 })
	passivated := func(p *proc) float64 { return kindSum(t, []*proc{p}, "presence_actor_passivations_total", "view") }
	base, p2, p3 := views(), passivated(nodes[1]), passivated(nodes[2])
	if err := bob.Query(ctx, "q1", known, hidden); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := bob.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s := f.GetSnapshot(); s != nil {
			if ps := s.GetPresences(); s.GetRequestId() != "q1" || len(ps) != 1 || ps[0].GetUser() != known || ps[0].GetStatus() != messages.Status_offline {
				t.Fatalf("answer %v, want q1 with %s offline alone", s, known)
			}
			break
		}
	}
	waitFor(t, 15*time.Second, fmt.Sprintf("views back to %v, the woken ones on n2 and n3 passivated", base), func() bool {
		return maps.Equal(views(), base) && passivated(nodes[1]) > p2 && passivated(nodes[2]) > p3
	})
	if s := nodes[0].metric(`presence_subscriptions{tier="realtime"}`) + nodes[0].metric(`presence_subscriptions{tier="batched"}`) + nodes[0].metric("presence_subscribers"); s != 0 {
		t.Fatalf("n1 holds subscriptions after a query: %v", s)
	}
}
