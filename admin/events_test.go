package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/actors"
)

// GET /api/events streams a device's lease going up and down and the
// user's published changes, the offline with its latency from the
// departure; with an admin token it takes ?token=.
func TestEventStream(t *testing.T) {
	f := newFixture(t, "s3cret")
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	res, err := http.Get(f.srv.URL + "/api/events")
	if err != nil || res.StatusCode != 401 {
		t.Fatalf("events without the token: %v %v, want 401", res, err)
	}
	res.Body.Close()
	// ?token= is for the event stream only (EventSource cannot set a header).
	if res, err := http.Get(f.srv.URL + "/api/cluster?token=s3cret"); err != nil || res.StatusCode != 401 {
		t.Fatalf("?token= on another path: %v %v, want 401", res, err)
	} else {
		res.Body.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/api/events?token=s3cret", nil)
	res, err = http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %v %v", res, err)
	}
	defer res.Body.Close()
	got := make(chan Event, 16)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev Event
				if json.Unmarshal([]byte(data), &ev) == nil {
					got <- ev
				}
			}
		}
		close(got)
	}()
	time.Sleep(100 * time.Millisecond) // the subscription reaches the events actor
	c, err := f.node.Gateway().Open(ctx, actors.OpenRequest{User: "alice", Device: "phone", Attempt: 1, ConnID: "c1", Socket: nopSocket{}})
	if err != nil {
		t.Fatal(err)
	}
	next := func(kind string) Event {
		t.Helper()
		for ev := range got {
			if ev.Kind == kind {
				return ev
			}
		}
		t.Fatalf("no %s event", kind)
		return Event{}
	}
	if ev := next("device_up"); ev.User != "alice" || ev.Device != "phone" || ev.Gateway != "n1" || ev.Node != "n1" || ev.AtMs == 0 {
		t.Fatalf("device_up %+v", ev)
	}
	if ev := next("published"); ev.User != "alice" || ev.Status != "online" {
		t.Fatalf("published %+v", ev)
	}
	c.Closed()
	if ev := next("device_down"); ev.Reason != "close" {
		t.Fatalf("device_down %+v", ev)
	}
	// Fast preset: debounce 200 ms less its delivery budget.
	if ev := next("published"); ev.Status != "offline" || ev.LatencyMs < 150 || ev.LatencyMs > 1000 {
		t.Fatalf("published %+v, want offline about the debounce after the close", ev)
	}
}

// The dashboard page and its assets are served without the admin token
// (they hold nothing secret); unknown API paths are still 404.
func TestDashboardServed(t *testing.T) {
	f := newFixture(t, "s3cret")
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	for path, want := range map[string]string{"/": "<title>presence", "/static/app.js": "EventSource", "/static/style.css": "body"} {
		res, err := http.Get(f.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b := new(strings.Builder)
		_, _ = bufio.NewReader(res.Body).WriteTo(b)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(b.String(), want) {
			t.Fatalf("GET %s: %d, want 200 with %q", path, res.StatusCode, want)
		}
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/api/nothing", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 404 {
		t.Fatalf("unknown API path: %v %v, want 404", res, err)
	}
	res.Body.Close()
}
