package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/admin"
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
