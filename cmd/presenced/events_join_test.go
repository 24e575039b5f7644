package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presence-im/presence/admin"
)

// eventLog is what an admin event stream delivered so far.
type eventLog struct {
	mu     sync.Mutex
	events []admin.Event
}

func (l *eventLog) has(match func(admin.Event) bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range l.events {
		if match(ev) {
			return true
		}
	}
	return false
}

// streamEvents reads p's GET /api/events until ctx ends.
func (p *proc) streamEvents(ctx context.Context) *eventLog {
	p.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+p.admin+"/api/events", nil)
	p.authorize(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		p.t.Fatalf("%s /api/events: %v %v", p.name, res, err)
	}
	l := &eventLog{}
	done := make(chan struct{})
	p.t.Cleanup(func() { res.Body.Close(); <-done })
	go func() {
		defer close(done)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			var ev admin.Event
			if ok && json.Unmarshal([]byte(data), &ev) == nil {
				l.mu.Lock()
				l.events = append(l.events, ev)
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// An event stream opened on n1 before n2 joins hears n2's events from the
// join on: n2 spawns its events actor before the gossip announces it, so
// the subscription n1 sends when it sees n2 join is not lost (it was: the
// events actor came a second later, and the history resubscribed every 5 s
// to make up for it).
func TestEventStreamHearsAMemberFromItsJoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	db := sqliteDSN(t)
	n1 := startProc(t, "n1", "--policy-dsn", db)
	stream := n1.streamEvents(ctx)
	n2 := startProc(t, "n2", "--policy-dsn", db, "--join", n1.gossip)
	converged(t, n1, n2)
	users := make([]string, 16) // leases spread over both nodes
	for i := range users {
		users[i] = fmt.Sprintf("j%d", i)
		n2.dialAlive(ctx, users[i], "phone", 1)
	}
	n1.waitOnline(users...)
	var onN2 []string // users whose lease lives on n2: its device_up comes from n2's events actor
	for _, u := range users {
		var g admin.Graph
		if n1.getJSON("/api/users/"+u+"/graph", &g); len(g.Devices) == 1 && g.Devices[0].LeaseNode == "n2" {
			onN2 = append(onN2, u)
		}
	}
	if len(onN2) == 0 {
		t.Fatal("no lease of 16 on n2: placement is not spreading identities")
	}
	for _, u := range onN2 {
		waitFor(t, 5*time.Second, "n1's stream hears n2's device_up of "+u, func() bool {
			return stream.has(func(ev admin.Event) bool { return ev.Kind == "device_up" && ev.Node == "n2" && ev.User == u })
		})
	}
}
