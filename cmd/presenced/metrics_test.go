package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads a node's /metrics: family name -> family.
func (p *proc) scrape() map[string]*dto.MetricFamily {
	p.t.Helper()
	req, _ := http.NewRequest("GET", "http://"+p.admin+"/metrics", nil)
	p.authorize(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		p.t.Fatalf("/metrics: %v", err)
	}
	return fams
}

// gauge is a family's single value (the sum over its series).
func gauge(fams map[string]*dto.MetricFamily, name string) float64 {
	var sum float64
	for _, m := range fams[name].GetMetric() {
		sum += m.GetGauge().GetValue()
	}
	return sum
}

// documentedMetrics reads the metric names of docs/operations.md's table;
// lazy are those whose row says a series appears with its first event.
func documentedMetrics(t *testing.T) (names, lazy []string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "## Metrics (`GET /metrics`)")
	table, _, _ = strings.Cut(table, "\n## ")
	row := regexp.MustCompile("^\\| `(presence_[a-z_]+)")
	for _, line := range strings.Split(table, "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
			if strings.Contains(line, "appears with its first") {
				lazy = append(lazy, m[1])
			}
		}
	}
	return names, lazy
}

// The table in docs/operations.md lists exactly the presence_ metrics a
// running node exports, and presence_connections counts the in-process
// demo devices that presence_ws_connections cannot see.
func TestMetricsTableMatchesNode(t *testing.T) {
	// With a webhook endpoint (nobody listens: its deliveries are retried)
	// and --gc-quiet, so that their metrics are there to compare too.
	p := startProc(t, "n1", "--demo", "4", "--policy-dsn", "memory", "--webhook-url", "http://127.0.0.1:9/hooks", "--webhook-secret", hookSecret, "--gc-quiet", "25")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := p.dial(ctx, "alice", "phone", 1)
	defer c.Close()
	keepAlive(ctx, c)
	var fams map[string]*dto.MetricFamily
	waitFor(t, 15*time.Second, "the demo devices and alice connected", func() bool {
		fams = p.scrape()
		return gauge(fams, "presence_connections") >= 3 && gauge(fams, "presence_ws_connections") == 1
	})
	if conns, actors := gauge(fams, "presence_connections"), fams["presence_actors"]; actors == nil || conns < 3 {
		t.Fatalf("presence_connections = %v, presence_actors = %v", conns, actors)
	}
	if _, ok := fams["presence_gc_percent"]; !ok && os.Getenv("GOGC") == "" {
		t.Error("presence_gc_percent is not exported with --gc-quiet 25")
	}
	names, lazy := documentedMetrics(t)
	if len(names) < 20 {
		t.Fatalf("%d metrics in docs/operations.md's table: the table was not found", len(names))
	}
	for name := range fams {
		if strings.HasPrefix(name, "presence_") && !slices.Contains(names, name) {
			t.Errorf("%s is exported but not in docs/operations.md's metrics table", name)
		}
	}
	for _, name := range names {
		if _, ok := fams[name]; !ok && !slices.Contains(lazy, name) {
			t.Errorf("%s is in docs/operations.md's table but not in /metrics", name)
		}
	}
}

// A node killed before anyone looks is in the survivors' histories: its
// death in the membership timeline and its devices' offlines with their
// leave mode and latency; the survivors' detection histograms count each.
func TestHistoryKeepsANodeDeath(t *testing.T) {
	nodes, _ := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	type snapshot struct {
		Events []struct {
			Kind, Node, Member, Reason, Status, User string
			LatencyMs                                int64 `json:"latency_ms"`
		} `json:"events"`
		Members map[string][]struct{ State string } `json:"members"`
		Samples []struct{}                          `json:"samples"`
	}
	var h snapshot
	users := make([]string, 6) // views spread: some live on a survivor
	for i := range users {
		users[i] = fmt.Sprintf("carol%d", i)
		keepAlive(ctx, nodes[2].dial(ctx, users[i], "phone", 1))
	}
	nodes[0].waitOnline(users...)
	nodes[2].kill()
	offlines := 0
	waitFor(t, 25*time.Second, "n1's history shows n3 dead and carol's offlines", func() bool {
		h = snapshot{}
		nodes[0].getJSON("/api/history", &h)
		dead := false
		for _, tr := range h.Members["n3"] {
			dead = dead || tr.State == "dead"
		}
		offlines = 0
		for _, ev := range h.Events {
			if ev.Kind == "published" && strings.HasPrefix(ev.User, "carol") && ev.Status == "offline" && ev.LatencyMs > 0 &&
				(ev.Reason == "gateway_crash" || ev.Reason == "owner_crash") {
				offlines++
			}
		}
		return dead && offlines > 0
	})
	waitFor(t, 10*time.Second, "every survivor's detection histogram counts the offlines n1's history shows", func() bool {
		var observed uint64
		for _, p := range nodes[:2] {
			for _, m := range p.scrape()["presence_offline_detection_seconds"].GetMetric() {
				if v := m.GetLabel()[0].GetValue(); v == "gateway_crash" || v == "owner_crash" {
					observed += m.GetHistogram().GetSampleCount()
				}
			}
		}
		h = snapshot{}
		nodes[0].getJSON("/api/history", &h)
		published := 0
		for _, ev := range h.Events {
			if ev.Kind == "published" && ev.Status == "offline" && ev.LatencyMs > 0 && ev.Reason != "" {
				published++
			}
		}
		return observed == uint64(published) && published >= offlines
	})
}
