package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) } // ants' package-level pool

type fixture struct {
	node     *actors.Node
	policies *store.MemoryPolicies
	srv      *httptest.Server
}

func newFixture(t *testing.T, token string, opts ...func(*Server)) *fixture {
	t.Helper()
	reg := prometheus.NewRegistry()
	f := &fixture{policies: store.NewMemoryPolicies()}
	n, err := actors.Start(actors.Deps{NodeID: "n1", Timing: config.Fast(), Seed: 1, Policies: f.policies, History: store.NewMemoryHistory(), Metrics: actors.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	f.node = n
	api := &Server{Node: n, Members: cluster.Single{Member: cluster.Member{ID: "n1", State: cluster.Alive}}, Timing: config.Fast(), Policies: f.policies, Gatherer: reg, Token: token}
	for _, o := range opts {
		o(api)
	}
	f.srv = httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		f.srv.Close()
		n.Stop()
		time.Sleep(1100 * time.Millisecond) // proto.actor's dead-letter throttle goroutine
	})
	return f
}

func (f *fixture) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

type nopSocket struct{}

func (nopSocket) Send(*messages.Frame) bool        { return true }
func (nopSocket) Close(messages.CloseCode, string) {}

func TestRouteAndPresence(t *testing.T) {
	f := newFixture(t, "")
	if code, body := f.do(t, "GET", "/api/route/alice", ""); code != 200 || !strings.Contains(body, `"devices":[]`) {
		t.Fatalf("route of an offline user = %d %s, want 200 with no devices", code, body)
	}
	c, err := f.node.Gateway().Open(context.Background(), actors.OpenRequest{User: "alice", Device: "phone", Attempt: 1, ConnID: "c1", Socket: nopSocket{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Closed()
	var route struct {
		Devices []Device `json:"devices"`
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(route.Devices) == 0 && time.Now().Before(deadline) {
		_, body := f.do(t, "GET", "/api/route/alice", "")
		_ = json.Unmarshal([]byte(body), &route)
	}
	if len(route.Devices) != 1 || route.Devices[0].ConnID != "c1" || route.Devices[0].Node != "n1" {
		t.Fatalf("route = %+v, want c1 on n1", route)
	}
	code, body := f.do(t, "POST", "/api/presence/batch", `{"users":["alice","bob"]}`)
	if code != 200 || !strings.Contains(body, `"status":"online"`) || !strings.Contains(body, `"status":"offline"`) {
		t.Fatalf("batch = %d %s", code, body)
	}
	if code, body := f.do(t, "GET", "/api/bounds", ""); code != 200 || !strings.Contains(body, `"half_open_ms":1000`) {
		t.Fatalf("bounds = %d %s", code, body)
	}
}

// GET /api/bounds publishes, in a cluster, the bounds that grow with its
// size for the members alive now.
func TestBoundsSize(t *testing.T) {
	var asked int
	f := newFixture(t, "", func(s *Server) {
		s.Size = func(n int) SizeBounds { asked = n; return SizeBounds{Members: n, FenceMs: 7700} }
	})
	var b Bounds
	code, body := f.do(t, "GET", "/api/bounds", "")
	if err := json.Unmarshal([]byte(body), &b); code != 200 || err != nil || b.Size == nil || b.Size.FenceMs != 7700 || asked != 1 {
		t.Fatalf("bounds = %d %s (%v), asked for %d members", code, body, err, asked)
	}
	plain := newFixture(t, "")
	if _, body := plain.do(t, "GET", "/api/bounds", ""); strings.Contains(body, `"size"`) {
		t.Fatalf("a node without Size publishes a size section: %s", body)
	}
}

// GET /api/bounds publishes each heartbeat class's interval, stale and
// half-open bound as config computes them from the running timings: the
// battery class's BatteryFactor times longer, the standard one's equal to
// the top-level half-open bound.
func TestBoundsClasses(t *testing.T) {
	f := newFixture(t, "")
	code, body := f.do(t, "GET", "/api/bounds", "")
	var b Bounds
	if err := json.Unmarshal([]byte(body), &b); code != 200 || err != nil {
		t.Fatalf("bounds = %d %s (%v)", code, body, err)
	}
	timing := config.Fast()
	for _, name := range []string{config.ClassStandard, config.ClassBattery} {
		c, _ := timing.Class(name)
		want := Class{HeartbeatMs: c.Heartbeat.Milliseconds(), StaleMs: c.Stale.Milliseconds(), HalfOpenMs: c.HalfOpen.Milliseconds()}
		if got, ok := b.Classes[name]; !ok || got != want {
			t.Errorf("class %s = %+v (listed %v), want %+v", name, got, ok, want)
		}
	}
	battery, bounds := b.Classes[config.ClassBattery], timing.Bounds()
	if battery.HalfOpenMs != bounds.Battery.HalfOpen.Milliseconds() || battery.HeartbeatMs != int64(timing.BatteryFactor)*b.Timing.HeartbeatMs ||
		battery.StaleMs <= b.Timing.StaleMs {
		t.Errorf("battery %+v: not the config's battery bounds %+v, factor %d of heartbeat %d ms", battery, bounds.Battery, timing.BatteryFactor, b.Timing.HeartbeatMs)
	}
	if std := b.Classes[config.ClassStandard]; std.HalfOpenMs != b.HalfOpenMs {
		t.Errorf("standard half-open %d ms, top-level %d ms", std.HalfOpenMs, b.HalfOpenMs)
	}
}

// openDevice connects a device declaring its platform and activity.
func (f *fixture) openDevice(t *testing.T, user, device string, p messages.Platform, a messages.Activity) {
	t.Helper()
	c, err := f.node.Gateway().Open(context.Background(), actors.OpenRequest{User: user, Device: device, Attempt: 1, ConnID: user + "-" + device, Socket: nopSocket{},
		Platform: p, Activity: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Closed)
}

// POST /api/presence/batch answers each user as GET /api/route/{user}
// does: the devices ordered by deliverability (active, idle, background),
// with their platform and activity, and the foreground and attended flags.
func TestBatchRoutesAsTheRoute(t *testing.T) {
	f := newFixture(t, "")
	f.openDevice(t, "alice", "phone", messages.Platform_mobile, messages.Activity_background)
	f.openDevice(t, "alice", "laptop", messages.Platform_desktop, messages.Activity_active)
	f.openDevice(t, "alice", "tablet", messages.Platform_web, messages.Activity_idle)
	f.openDevice(t, "bob", "phone", messages.Platform_mobile, messages.Activity_background)
	f.openDevice(t, "carol", "laptop", messages.Platform_desktop, messages.Activity_idle)
	want := map[string]struct {
		order                []string
		foreground, attended bool
	}{
		"alice": {[]string{"laptop:desktop:active", "tablet:web:idle", "phone:mobile:background"}, true, true},
		"bob":   {[]string{"phone:mobile:background"}, false, false},
		"carol": {[]string{"laptop:desktop:idle"}, true, false},
	}
	routes := map[string]Route{}
	deadline := time.Now().Add(5 * time.Second)
	for user, w := range want {
		for len(routes[user].Devices) != len(w.order) && time.Now().Before(deadline) {
			var r Route
			_, body := f.do(t, "GET", "/api/route/"+user, "")
			_ = json.Unmarshal([]byte(body), &r)
			routes[user] = r
		}
	}
	code, body := f.do(t, "POST", "/api/presence/batch", `{"users":["alice","bob","carol"]}`)
	var batch struct{ Users []UserPresence }
	if err := json.Unmarshal([]byte(body), &batch); code != 200 || err != nil || len(batch.Users) != 3 {
		t.Fatalf("batch = %d %s (%v)", code, body, err)
	}
	for _, p := range batch.Users {
		w, r := want[p.User], routes[p.User]
		var order []string
		for _, d := range p.Devices {
			order = append(order, d.Device+":"+d.Platform+":"+d.Activity)
		}
		if !slices.Equal(order, w.order) || p.Foreground != w.foreground || p.Attended != w.attended {
			t.Errorf("batch %s: devices %v foreground %v attended %v; want %v, %v, %v", p.User, order, p.Foreground, p.Attended, w.order, w.foreground, w.attended)
		}
		if !slices.Equal(p.Devices, r.Devices) || p.Foreground != r.Foreground || p.Attended != r.Attended {
			t.Errorf("batch %s: %+v, the route answers %+v", p.User, p, r)
		}
	}
}

// Bad input is refused with 400 and a message, and changes nothing.
func TestBadInput(t *testing.T) {
	f := newFixture(t, "")
	if code, _ := f.do(t, "PUT", "/api/users/alice/policy", `{"granularity":"exact","contacts":["bob"]}`); code != 200 {
		t.Fatalf("valid policy refused: %d", code)
	}
	for _, c := range []struct{ path, body, want string }{
		{"/api/users/alice/policy", `{"granularity":"fuzzy"}`, "granularity"},
		{"/api/users/alice/policy", `{"granularity":"exact","blocked":["alice"]}`, "itself"},
		{"/api/users/alice/policy", `{"granularity":"exact","friends":["x"]}`, "unknown field"},
		{"/api/users/alice/policy", `not json`, "policy body"},
		{"/api/users/a%2Fb/policy", `{"granularity":"exact"}`, "only letters"},
	} {
		code, body := f.do(t, "PUT", c.path, c.body)
		if code != 400 || !strings.Contains(body, c.want) {
			t.Errorf("PUT %s %s = %d %s, want 400 mentioning %q", c.path, c.body, code, body, c.want)
		}
	}
	if _, body := f.do(t, "GET", "/api/users/alice/policy", ""); !strings.Contains(body, `"contacts":["bob"]`) || !strings.Contains(body, `"blocked":[]`) {
		t.Fatalf("policy after refused writes = %s, want the first one", body)
	}
	if code, _ := f.do(t, "POST", "/api/presence/batch", `{"users":[]}`); code != 400 {
		t.Fatalf("empty batch = %d, want 400", code)
	}
	if code, _ := f.do(t, "GET", "/api/users/nobody/policy", ""); code != 404 {
		t.Fatalf("missing policy = %d, want 404", code)
	}
}

// A route lookup whose owner cannot be reached is unknown (503), never an
// empty (offline) answer.
func TestUnreachableOwnerIs503(t *testing.T) {
	f := newFixture(t, "")
	f.node.Stop()
	code, body := f.do(t, "GET", "/api/route/alice", "")
	if code != 503 || strings.Contains(body, "devices") {
		t.Fatalf("route with the node stopped = %d %s, want 503 without devices", code, body)
	}
}

// /readyz follows Ready (the gateway listening and not draining) and says
// why not; /healthz stays 200.
func TestReadyz(t *testing.T) {
	ready := errors.New("gateway: not taking devices: draining")
	srv := httptest.NewServer((&Server{Ready: func() error { return ready }}).Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("readyz while not ready = %d %q, want 503 naming why", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz while not ready = %d, want 200", code)
	}
	ready = nil
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("readyz when ready = %d, want 200", code)
	}
}

func TestAdminToken(t *testing.T) {
	f := newFixture(t, "s3cret")
	if code, _ := f.do(t, "GET", "/api/bounds", ""); code != 401 {
		t.Fatalf("no token = %d, want 401", code)
	}
	for _, probe := range []string{"/healthz", "/readyz"} { // a kubelet's probes carry no token
		if code, _ := f.do(t, "GET", probe, ""); code != 200 {
			t.Fatalf("%s without token = %d, want 200", probe, code)
		}
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/api/bounds", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("with token = %d, want 200", res.StatusCode)
	}
}

// The profiler is on the admin address, behind the token: without it 401,
// with it the profile index.
func TestPprofBehindToken(t *testing.T) {
	f := newFixture(t, "s3cret")
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		if code, _ := f.do(t, "GET", path, ""); code != 401 {
			t.Fatalf("%s without token = %d, want 401", path, code)
		}
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/debug/pprof/goroutine?debug=1", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "goroutine profile:") {
		t.Fatalf("with token = %d %.80q, want 200 and a goroutine profile", res.StatusCode, body)
	}
}
