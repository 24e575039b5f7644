package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The summary is min / median / max per bound; a latency past its bound, or
// any finding, fails the run; the report is written as JSON and HTML.
func TestSummarizeAndWrite(t *testing.T) {
	rep := &Report{Scenario: "gateway-crash", Findings: map[string]int{}, Rounds: []*Round{{
		Latencies: []Latency{
			{Device: "d0", Watcher: "w1", Bound: "gateway_crash", Ms: 900, BoundMs: 1700},
			{Device: "d1", Watcher: "w1", Bound: "gateway_crash", Ms: 1100, BoundMs: 1700},
			{Device: "d2", Watcher: "w1", Bound: "gateway_crash", Ms: 1000, BoundMs: 1700},
			{Device: "d3", Watcher: "w1", Bound: "owner_crash", Ms: 3000, BoundMs: 6850},
		},
	}}}
	rep.summarize()
	if !rep.OK || len(rep.Summary) != 2 {
		t.Fatalf("within bounds: ok %v, summary %+v", rep.OK, rep.Summary)
	}
	if s := rep.Summary[0]; s.Bound != "gateway_crash" || s.N != 3 || s.MinMs != 900 || s.MedMs != 1000 || s.MaxMs != 1100 || s.Within != 3 {
		t.Fatalf("gateway_crash summary %+v", s)
	}

	over := &Report{Findings: map[string]int{}, Rounds: []*Round{{Latencies: []Latency{{Device: "d0", Bound: "graceful_close", Ms: 204, BoundMs: 200}}}}}
	over.summarize()
	if over.OK || over.Findings["over_bound"] != 1 {
		t.Fatalf("a latency past its bound: ok %v findings %v", over.OK, over.Findings)
	}
	ghost := &Report{Findings: map[string]int{}, Rounds: []*Round{{Latencies: []Latency{{Bound: "graceful_close", Ms: 150, BoundMs: 200}}}}}
	ghost.Rounds[0].find("ghost", "d0", "", "route still [n2]")
	ghost.summarize()
	if ghost.OK {
		t.Fatal("a ghost passed")
	}
	empty := &Report{Findings: map[string]int{}}
	if empty.summarize(); empty.OK {
		t.Fatal("a run that measured nothing passed")
	}

	dir := t.TempDir()
	if err := ghost.write(dir); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	js, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	if !strings.Contains(string(html), "FAILED") || !strings.Contains(string(html), "route still [n2]") || !strings.Contains(string(js), `"ghost": 1`) {
		t.Fatalf("report:\n%s\n%s", html, js)
	}
}
