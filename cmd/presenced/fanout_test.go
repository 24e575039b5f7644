package main

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/messages"
)

// metric reads one sample of p's /metrics, by its full name with labels as
// exposed (e.g. `presence_event_messages_total{path="fanout"}`); 0 if absent.
func (p *proc) metric(sample string) float64 {
	p.t.Helper()
	res, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// Three subscribers on n1 watch a user whose view lives on n2: each event
// crosses to n1 in one message and reaches all three. n2 reports n1's
// actors too.
func TestClusterFanOutOncePerNode(t *testing.T) {
	nodes, _ := startCluster(t, 2)
	n1, n2 := nodes[0], nodes[1]
	n1.settled()
	user := ownedBy(t, n1, "n2")
	n1.put("/api/users/"+user+"/policy", `{"granularity":"exact","contacts":["s1","s2","s3"]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var subs []chan *messages.Presence
	for _, s := range []string{"s1", "s2", "s3"} {
		c := n1.dial(ctx, s, "phone", 1)
		keepAlive(ctx, c)
		subscribe(ctx, t, c, user)
		events := make(chan *messages.Presence, 10)
		go readPresences(ctx, c, events)
		subs = append(subs, events)
	}
	next := func(want messages.Status) {
		t.Helper()
		for i, events := range subs {
			select {
			case p := <-events:
				if p.GetStatus() != want {
					t.Fatalf("subscriber s%d: %v, want %v", i+1, p, want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("subscriber s%d: no event, want %v", i+1, want)
			}
		}
	}
	// Any node reports every node's live actors.
	var c admin.Cluster
	code := n2.getJSON("/api/cluster", &c)
	if code != http.StatusOK || c.Actors["n1"]["connection"] != 3 || c.Actors["n1"]["gateway"] != 1 || c.Actors["n2"]["gateway"] != 1 {
		t.Fatalf("n2's /api/cluster actors: %v (status %d), want n1 with 3 connections and a gateway on each node", c.Actors, code)
	}
	fanout, local := `presence_event_messages_total{path="fanout"}`, `presence_event_messages_total{path="local"}`
	before, beforeLocal := n2.metric(fanout), n2.metric(local)

	dev := n2.dial(ctx, user, "phone", 1)
	keepAlive(ctx, dev)
	next(messages.Status_online)
	_ = dev.Close()
	next(messages.Status_offline)
	if got := n2.metric(fanout) - before; got != 2 {
		t.Fatalf("fan-out messages from n2: %v for two events, want 2", got)
	}
	if got := n2.metric(local) - beforeLocal; got != 0 {
		t.Fatalf("local fan-outs on n2: %v, want 0 (all three sinks are on n1)", got)
	}
}
