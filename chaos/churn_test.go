package chaos

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presence-im/presence/store/sqlite"
)

func testPlan(users int) *churnPlan {
	o := Options{Users: users, Online: 100}
	o.churnDefaults()
	return newChurnPlan(o, 3, 1)
}

// The schedule: every user once, contacts distinct and never the user,
// waves apart by more than the idle window, and about Online connected at
// once (stays are drawn from half to one and a half of the average).
func TestChurnPlan(t *testing.T) {
	p := testPlan(3000)
	if len(p.sessions) != 3000 || len(p.residents) != 5 || len(p.warm) != 1000 {
		t.Fatalf("%d sessions, %d residents, %d warm-up, want 3000, 5 and a wave's 1000", len(p.sessions), len(p.residents), len(p.warm))
	}
	if last := p.warm[len(p.warm)-1]; last.At >= p.Arrive || !strings.HasPrefix(last.User, "w") {
		t.Fatalf("the warm-up's last user %s arrives at %v, want a user of its own within a wave's %v", last.User, last.At, p.Arrive)
	}
	pool := map[string]bool{}
	for _, s := range p.warm {
		for _, c := range s.Contacts {
			pool[c] = true
		}
	}
	if len(pool) < 2000 { // as in a wave: among all 3000 names, most never online
		t.Fatalf("the warm-up's contacts are %d distinct users, want them drawn among as many names as a wave's", len(pool))
	}
	users := map[string]bool{}
	for _, s := range p.sessions {
		if users[s.User] {
			t.Fatalf("%s twice", s.User)
		}
		users[s.User] = true
		if len(s.Contacts) != ChurnContacts || slices.Contains(s.Contacts, s.User) || len(slices.Compact(slices.Sorted(slices.Values(s.Contacts)))) != ChurnContacts {
			t.Fatalf("%s: contacts %v", s.User, s.Contacts)
		}
	}
	waves := p.waves()
	if len(waves) != p.Waves || len(waves[0]) != 1000 {
		t.Fatalf("%d waves of %d", len(waves), len(waves[0]))
	}
	peak := 0
	for at := time.Duration(0); at < p.Arrive+p.Stay*3/2; at += 100 * time.Millisecond {
		n := 0
		for _, s := range waves[1] {
			if s.At <= at && at < s.At+s.Stay {
				n++
			}
		}
		peak = max(peak, n)
	}
	if peak < p.Online*8/10 || peak > p.Online*13/10 {
		t.Fatalf("peak %d connected at once, want about %d", peak, p.Online)
	}
}

// What stays after each wave must not grow with the waves.
func TestChurnFlat(t *testing.T) {
	after := func(views, heap, rss float64) []NodeSample {
		return []NodeSample{{Node: "n1", Lease: 5, View: views, Live: heap, RSS: rss}}
	}
	for _, c := range []struct {
		last []NodeSample
		ok   bool
	}{{after(10, 84e6, 105e6), true}, {after(30, 84e6, 100e6), false}, {after(10, 100e6, 100e6), false}, {after(10, 80e6, 120e6), false}} {
		ch := &Churn{AfterWave: [][]NodeSample{after(10, 80e6, 100e6), after(10, 80e6, 100e6), c.last}}
		ch.checkFlat()
		if len(ch.Checks) != 1 || ch.Checks[0].OK != c.ok {
			t.Errorf("%+v: %+v, want ok %v", c.last, ch.Checks, c.ok)
		}
	}
}

// Over many waves each end is the median of three readings: one reading
// low after wave 1 (55 MB where its neighbours read 60) does not make the
// end look grown; late readings all over it by more than 10% do.
func TestChurnFlatOverManyWaves(t *testing.T) {
	after := func(rss float64) []NodeSample {
		return []NodeSample{{Node: "n1", Lease: 5, View: 10, Live: 7e6, RSS: rss}}
	}
	run := func(rss ...float64) Check {
		ch := &Churn{}
		for _, r := range rss {
			ch.AfterWave = append(ch.AfterWave, after(r))
		}
		ch.checkFlat()
		return ch.Checks[0]
	}
	if c := run(55e6, 60e6, 59e6, 60e6, 61e6, 60e6, 61e6, 62e6, 62e6, 64e6, 62e6, 62e6); !c.OK || !strings.Contains(c.Detail, "waves 1 to 3 then after waves 10 to 12") {
		t.Errorf("a low first reading: %+v, want ok over the medians of waves 1-3 and 10-12", c)
	}
	if c := run(59e6, 60e6, 59e6, 60e6, 61e6, 63e6, 65e6, 66e6, 66e6, 67e6, 66e6, 68e6); c.OK {
		t.Errorf("late readings 13%% over the early ones: %+v, want failed", c)
	}
	if k := flatSpan(3); k != 1 {
		t.Errorf("flatSpan(3) = %d, want 1: with three waves the first and the last", k)
	}
}

// Each user's policy lets exactly those who have them as a contact see
// them; a warm-up contact that never connects has one too.
func TestChurnPolicies(t *testing.T) {
	p := testPlan(300)
	dir := t.TempDir()
	written, err := p.writePolicies(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]bool{}
	for _, s := range slices.Concat(p.residents, p.warm, p.sessions) {
		users[s.User] = true
		for _, c := range s.Contacts {
			users[c] = true
		}
	}
	if written != len(users) || written <= len(p.residents)+len(p.warm)+len(p.sessions) {
		t.Fatalf("%d policies written, want one per user and contact (%d), more than the sessions (%d)", written, len(users), len(p.residents)+len(p.warm)+len(p.sessions))
	}
	st, err := sqlite.Open(filepath.Join(dir, "presence.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := p.sessions[7]
	for _, w := range p.warm {
		for _, c := range w.Contacts {
			if !slices.ContainsFunc(p.warm, func(o *churnSession) bool { return o.User == c }) {
				if _, ok, err := st.Get(context.Background(), c); err != nil || !ok {
					t.Fatalf("no policy for %s, a contact of the warm-up that never connects: %v %v", c, ok, err)
				}
			}
		}
	}
	for _, c := range s.Contacts {
		doc, ok, err := st.Get(context.Background(), c)
		if err != nil || !ok || !slices.Contains(doc.Contacts, s.User) {
			t.Fatalf("policy of %s: %v %v %+v, want %s among its contacts", c, ok, err, doc, s.User)
		}
	}
}

// churnFixture is a plan of two devices, one gone long ago and one
// connected, with a baseline of 5 leases and 5 views, and a sample with
// leases and views as given.
func churnFixture(leases, views float64) (*Churn, *churnPlan, time.Time) {
	t0 := time.Now().Add(-time.Minute)
	var residents []*churnSession
	for range 5 {
		residents = append(residents, &churnSession{Resident: true, start: t0, up: t0.Add(-time.Minute)})
	}
	p := &churnPlan{Idle: time.Second, residents: residents, sessions: []*churnSession{
		{User: "a", Contacts: []string{"x", "y"}, start: t0, up: t0, down: t0.Add(time.Second)},
		{User: "b", Contacts: []string{"y", "z"}, At: 30 * time.Second, start: t0.Add(30 * time.Second), up: t0.Add(30 * time.Second)},
	}}
	base := []NodeSample{{Node: "n1", Lease: 5, View: 5, RSS: 100e6, Live: 80e6}}
	ch := &Churn{Baseline: base, Samples: []ChurnSample{{At: t0.Add(40 * time.Second), Nodes: []NodeSample{{Node: "n1", Lease: leases, View: views}}}}}
	return ch, p, t0
}

func failed(ch *Churn) []string {
	var out []string
	for _, c := range ch.Checks {
		if !c.OK {
			out = append(out, c.Name+": "+c.Detail)
		}
	}
	return out
}

// At a sample, b's lease and the views of b, y and z are explained (a left
// long before the window); more than that and 10% fails the check, and
// fewer leases than devices connected fails the other.
func TestChurnTracking(t *testing.T) {
	for _, c := range []struct {
		leases, views float64
		fail          string
	}{
		{6, 8, ""},
		{6, 9, "views track devices"},  // a's view stayed: 5 + 3 x 1.1 = 8.3
		{7, 8, "leases track devices"}, // a's lease stayed
		{5, 8, "connected devices hold leases"},
	} {
		ch, p, t0 := churnFixture(c.leases, c.views)
		ch.checkTracking(p, t0, time.Now())
		got := failed(ch)
		if c.fail == "" && len(got) > 0 || c.fail != "" && (len(got) != 1 || !strings.HasPrefix(got[0], c.fail)) {
			t.Errorf("leases %v views %v: failed %q, want %q", c.leases, c.views, got, c.fail)
		}
		if ch.Samples[0].ViewLimit == 0 {
			t.Errorf("the limit is not kept for the chart")
		}
	}
}

// After the run: within 10% of the baseline passes, more fails, each
// figure on its own.
func TestChurnBaseline(t *testing.T) {
	for _, c := range []struct {
		final NodeSample
		fail  string
	}{
		{NodeSample{Node: "n1", Lease: 5, View: 5, RSS: 109e6, Live: 85e6}, ""},
		{NodeSample{Node: "n1", Lease: 5, View: 50, RSS: 109e6, Live: 85e6}, "views back to baseline"},
		{NodeSample{Node: "n1", Lease: 5, View: 5, RSS: 112e6, Live: 85e6}, "n1 RSS back to baseline"},
		{NodeSample{Node: "n1", Lease: 5, View: 5, RSS: 100e6, Live: 90e6}, "n1 live heap back to baseline"},
	} {
		ch, _, _ := churnFixture(0, 0)
		ch.Final = []NodeSample{c.final}
		ch.checkBaseline()
		got := failed(ch)
		if c.fail == "" && len(got) > 0 || c.fail != "" && (len(got) != 1 || !strings.HasPrefix(got[0], c.fail)) {
			t.Errorf("%+v: failed %q, want %q", c.final, got, c.fail)
		}
		if backToBaseline(ch.Baseline, ch.Final) != (c.fail == "") {
			t.Errorf("%+v: backToBaseline disagrees with the checks", c.final)
		}
	}
}

// The charts: a panel of actors and one of memory, with the devices online
// as an area and the phases marked.
func TestChurnCharts(t *testing.T) {
	t0 := time.Now()
	ch := &Churn{Phases: []Phase{{"waves", t0.Add(time.Second)}}}
	for i := range 5 {
		ch.Samples = append(ch.Samples, ChurnSample{At: t0.Add(time.Duration(i) * time.Second), Online: i * 10,
			Nodes: []NodeSample{{Node: "n1", Lease: float64(i), View: float64(2 * i), RSS: 50e6, Heap: 40e6}}})
	}
	svg := string(ch.Charts())
	for _, want := range []string{"live actors", "memory per node", "n1 RSS", "n1 heap", ">waves<", "<path"} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart without %q", want)
		}
	}
	if strings.Count(svg, "<svg") != 2 {
		t.Errorf("%d charts, want 2", strings.Count(svg, "<svg"))
	}
}

// report.html shows a churn round: its charts, checks and readings; a
// round whose checks all hold is ok without any latency.
func TestChurnReportPage(t *testing.T) {
	ch, _, t0 := churnFixture(6, 8)
	ch.Samples = append(ch.Samples, ChurnSample{At: t0.Add(41 * time.Second), Nodes: ch.Samples[0].Nodes})
	ch.Cold, ch.Final, ch.AfterWave = ch.Baseline, ch.Baseline, [][]NodeSample{ch.Baseline}
	ch.checkBaseline()
	rep := &Report{Scenario: "churn", Rounds: []*Round{{Churn: ch}}, Findings: map[string]int{}}
	rep.summarize()
	dir := t.TempDir()
	if err := rep.write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Churn: actors and memory", "leases back to baseline", "after wave 1", "cold", "<svg"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report.html without %q", want)
		}
	}
	if !rep.OK {
		t.Errorf("not ok with every check holding")
	}
}

// A settled reading is one whose live heap the collection it asked for
// marked: a reading with another collection in between (the count up by
// two, live 10 MB) is taken again, and the next (up by one, live 7 MB)
// stands; a node that never gives one gives its last after CollectedTries,
// marked Unchecked; a profile refused gives a reading with Err.
func TestCollectedReadsItsOwnCollection(t *testing.T) {
	for _, c := range []struct {
		name      string
		steps     []int // the collections each profile request makes (0: refused)
		live      float64
		tries     int
		unchecked bool
		err       bool
	}{
		{"own collection at once", []int{1}, 7e6, 1, false, false},
		{"one more in between, then its own", []int{2, 1}, 7e6, 2, false, false},
		{"never its own", []int{2, 2, 2, 2, 2, 2}, 10e6, CollectedTries, true, false},
		{"profile refused", []int{0}, 0, 1, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			cycles, profiles, live := 0, 0, 5e6
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				switch r.URL.Path {
				case "/debug/pprof/heap":
					step := c.steps[profiles]
					profiles++
					if step == 0 {
						http.Error(w, "no", http.StatusServiceUnavailable)
						return
					}
					cycles += step
					live = 7e6 // the forced collection's
					if step > 1 {
						live = 10e6 // another's, later
					}
					w.Write([]byte("profile"))
				case "/metrics":
					fmt.Fprintf(w, "# TYPE go_gc_cycles_total_gc_cycles_total counter\ngo_gc_cycles_total_gc_cycles_total %d\n# TYPE go_gc_heap_live_bytes gauge\ngo_gc_heap_live_bytes %g\n", cycles, live)
				}
			}))
			defer srv.Close()
			n := &Node{ID: "n1", Admin: srv.Listener.Addr().String()}
			s := collected(t.Context(), n, filepath.Join(t.TempDir(), "heap.pb.gz"))
			if (s.Err != "") != c.err || s.Live != c.live || profiles != c.tries || s.Unchecked != c.unchecked {
				t.Fatalf("reading %+v after %d profiles, want live %g after %d, unchecked %v, an error %v", s, profiles, c.live, c.tries, c.unchecked, c.err)
			}
		})
	}
}

// A settled figure is the median of the readings that answered: one that
// failed (all zero) does not pull it down; of two, their mean; none
// answering gives the failure.
func TestMedianReadingSkipsFailures(t *testing.T) {
	r := func(rss float64) NodeSample { return NodeSample{Node: "n1", RSS: rss, Live: rss / 8} }
	failed := NodeSample{Node: "n1", Err: "refused"}
	if m := medianReading("n1", []NodeSample{r(60e6), r(64e6), r(58e6)}); m.RSS != 60e6 || m.Live != 7.5e6 {
		t.Errorf("three readings: RSS %g, live %g, want their medians 60e6, 7.5e6", m.RSS, m.Live)
	}
	if m := medianReading("n1", []NodeSample{r(60e6), failed, r(64e6)}); m.RSS != 62e6 || m.Err != "" {
		t.Errorf("one failed: %+v, want RSS 62e6 (the mean of the two that answered), no error", m)
	}
	if m := medianReading("n1", []NodeSample{failed, failed, failed}); m.Err == "" {
		t.Errorf("none answered: %+v, want the failure", m)
	}
}
