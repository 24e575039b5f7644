package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/store/sqlite"
	"github.com/presence-im/presence/webhook"
)

const hookSecret = "e2e-webhook-secret-0123456789"

// hookReceiver is the backend: it checks every signature, answers 500
// while failing, and keeps each user's versions in the order they came.
type hookReceiver struct {
	failing atomic.Bool
	down    bool // answer 503 for good

	mu       sync.Mutex
	versions map[string][]uint64
	last     map[string]webhook.Event
	bad, got int
}

func newHookReceiver(t *testing.T) (*hookReceiver, string) {
	rc := &hookReceiver{versions: map[string][]uint64{}, last: map[string]webhook.Event{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return rc, srv.URL + "/hooks"
}

func (rc *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := client.VerifyWebhook([]byte(hookSecret), r.Header.Get(webhook.SignatureHeader), body, time.Now(), time.Minute); err != nil {
		rc.mu.Lock()
		rc.bad++
		rc.mu.Unlock()
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if rc.down || rc.failing.Load() {
		http.Error(w, "down for now", http.StatusInternalServerError)
		return
	}
	var b struct{ Events []webhook.Event }
	_ = json.Unmarshal(body, &b)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, ev := range b.Events {
		rc.got++
		rc.versions[ev.User] = append(rc.versions[ev.User], ev.Version)
		if ev.Version >= rc.last[ev.User].Version {
			rc.last[ev.User] = ev
		}
	}
}

// matches reports whether the receiver's latest event of every user says
// what p's admin API says of it now: status and devices.
func (rc *hookReceiver) matches(p *proc, users []string) (bool, string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, u := range users {
		var st struct {
			Status  string `json:"status"`
			Devices []struct {
				Device string `json:"device"`
			} `json:"devices"`
		}
		if code := p.getJSON("/api/presence/"+u, &st); code != 200 {
			return false, fmt.Sprintf("%s: lookup %d", u, code)
		}
		ev := rc.last[u]
		var want, got []string
		for _, d := range st.Devices {
			want = append(want, d.Device)
		}
		for _, d := range ev.Devices {
			got = append(got, d.Device)
		}
		slices.Sort(want)
		slices.Sort(got)
		if ev.Status != st.Status || !slices.Equal(want, got) {
			return false, fmt.Sprintf("%s: received %s %v (v%d), the node says %s %v", u, ev.Status, got, ev.Version, st.Status, want)
		}
	}
	return true, ""
}

// Issue 26's test on three real nodes: devices come and go; the receiver
// answers 500 for a while; the node owning some users' views is killed
// while their changes wait; once the receiver answers 200 every user's
// latest state reaches it, each user's versions in order, every
// signature valid; duplicates are counted.
func TestClusterWebhooks(t *testing.T) {
	rc, url := newHookReceiver(t)
	nodes, _ := startCluster(t, 3, "--webhook-url", url, "--webhook-secret", hookSecret, "--webhook-retry-max", "1s")
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The first user's view lives on n3: its offline is n3's to deliver
	// when n3 dies.
	users := []string{ownedBy(t, n1, "n3")}
	for i := range 23 {
		users = append(users, fmt.Sprintf("w%02d", i))
	}
	conns := map[string]*client.Conn{}
	for i, u := range users {
		conns[u] = nodes[i%2].dialAlive(ctx, u, "phone", 1) // n1 and n2: n3's own devices die with it
	}
	n1.waitOnline(users...)
	waitFor(t, 10*time.Second, "every user online at the receiver", func() bool { ok, _ := rc.matches(n1, users); return ok })

	rc.failing.Store(true)
	for i, u := range users[:12] { // come and go while the receiver fails
		if i%2 == 0 {
			_ = conns[u].Close()
		} else {
			nodes[(i+1)%3].dialAlive(ctx, u, "laptop", 1)
		}
	}
	time.Sleep(time.Second) // the changes are rows now, retried
	n3.kill()               // with the views of a third of the users and its devices
	time.Sleep(time.Duration(n1.bounds().OwnerCrashMs) * time.Millisecond)
	rc.failing.Store(false)
	why := ""
	defer func() {
		if t.Failed() {
			t.Logf("the last difference: %s", why)
		}
	}()
	waitFor(t, 30*time.Second, "every user's latest state at the receiver", func() bool {
		ok, w := rc.matches(n1, users)
		why = w
		return ok
	})

	// Nothing left behind: n3's rows were claimed, or replaced by the
	// survivors' own newer ones (a view re-created there tells the
	// departure itself), and every one delivered.
	waitFor(t, 15*time.Second, "no row waiting", func() bool { return metricSum(t, n1, "presence_webhook_waiting") == 0 })
	t.Logf("rows claimed from n3: %v", metricSum(t, n1, "presence_webhook_claimed_total")+metricSum(t, n2, "presence_webhook_claimed_total"))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.bad != 0 {
		t.Fatalf("%d deliveries with a bad signature", rc.bad)
	}
	dups := 0
	for u, vs := range rc.versions {
		if !slices.IsSorted(vs) {
			t.Errorf("%s's versions arrived out of order: %v", u, vs)
		}
		for i := 1; i < len(vs); i++ {
			if vs[i] == vs[i-1] {
				dups++
			}
		}
	}
	t.Logf("%d events received, %d duplicates", rc.got, dups)
}

// A receiver down for good: the nodes keep at most a row per user and
// endpoint in the store, and nothing waiting in memory.
func TestWebhookReceiverDownIsBounded(t *testing.T) {
	rc, url := newHookReceiver(t)
	rc.down = true
	nodes, db := startCluster(t, 1, "--webhook-url", url, "--webhook-secret", hookSecret)
	n1 := nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const users = 20
	for round := range 5 {
		var cs []*client.Conn
		for i := range users {
			cs = append(cs, n1.dialAlive(ctx, fmt.Sprintf("d%02d", i), "phone", uint64(round+1)))
		}
		n1.waitOnline("d00", fmt.Sprintf("d%02d", users-1))
		for _, c := range cs {
			_ = c.Close()
		}
		time.Sleep(500 * time.Millisecond) // past the debounce: 20 offlines
	}
	s, err := sqlite.Open(strings.TrimPrefix(db, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.Hooks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the last changes written", func() bool {
		n, _ := h.CountHooks(ctx, webhook.Endpoint{URL: url}.Key(), "")
		return n == users
	})
	time.Sleep(time.Second)
	if n, _ := h.CountHooks(ctx, webhook.Endpoint{URL: url}.Key(), ""); n != users {
		t.Fatalf("%d rows for %d users after 5 rounds of 40 changes each: want one per user", n, users)
	}
	if v := metricValue(t, n1, "presence_webhook_pending"); v != 0 {
		t.Fatalf("presence_webhook_pending = %v, want 0: every change is a row", v)
	}
}

// metricSum is the sum of a metric's series in p's /metrics.
func metricSum(t *testing.T, p *proc, name string) float64 {
	t.Helper()
	res, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			var f float64
			fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &f)
			sum += f
		}
	}
	return sum
}

// metricValue is one unlabelled metric of p's /metrics.
func metricValue(t *testing.T, p *proc, name string) float64 {
	t.Helper()
	res, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	t.Fatalf("%s not in /metrics", name)
	return 0
}
