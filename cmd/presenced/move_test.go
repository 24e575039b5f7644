package main

import (
	"context"
	"testing"
	"time"

	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/messages"
)

// route is p's GET /api/route/{user}: the gateway node of each device.
func (p *proc) route(user string) (int, []string) {
	p.t.Helper()
	var r admin.Route
	code := p.getJSON("/api/route/"+user, &r)
	var nodes []string
	for _, d := range r.Devices {
		nodes = append(nodes, d.Node)
	}
	return code, nodes
}

// A device moves from n2 to n3 (a newer attempt takes over) and n2 dies
// right after: the route stays on n3 and subscribers see no offline.
func TestClusterDeviceMovesAsOldNodeDies(t *testing.T) {
	t.Parallel() // its own nodes; waits, mostly (make test's time)
	nodes, _ := startCluster(t, 3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n1.allow("mia", "sam")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sam := n1.dialAlive(ctx, "sam", "phone", 1)
	n2.dialAlive(ctx, "mia", "phone", 1)
	n1.waitOnline("mia")
	subscribe(ctx, t, sam, "mia")
	events := make(chan *messages.Presence, 100)
	go readPresences(ctx, sam, events)

	n3.dialAlive(ctx, "mia", "phone", 2) // takes over: the n2 connection gets 4001
	n2.kill()
	quiet := time.After(time.Duration(n1.bounds().OwnerCrashMs)*time.Millisecond + time.Second)
	for done := false; !done; {
		select {
		case p := <-events:
			if p.GetStatus() != messages.Status_online {
				t.Fatalf("mia, on n3, reported %v after n2 died", p)
			}
		case <-quiet:
			done = true
		}
	}
	code, route := n1.route("mia")
	if code != 200 || len(route) != 1 || route[0] != "n3" {
		t.Fatalf("route of mia: %d %v, want one device on n3", code, route)
	}
}
