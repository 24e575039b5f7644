package chaos

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The report draws a dot per latency on its bound's row (red past the
// bound) and a bar per round on the fault timeline; progress lines name
// the round and the devices up.
func TestReportCharts(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rep := &Report{Scenario: "kill", Findings: map[string]int{}, Rounds: []*Round{
		{Index: 0, Fault: "kill -9 n2", Start: t0, FaultAt: t0.Add(2 * time.Second), End: t0.Add(5 * time.Second), Latencies: []Latency{
			{Device: "d0", Watcher: "w1", Bound: "gateway_crash", Ms: 900, BoundMs: 1700},
			{Device: "d1", Watcher: "w1", Bound: "gateway_crash", Ms: 1800, BoundMs: 1700},
		}},
		{Index: 1, Fault: "kill -9 n3 <x>", Start: t0.Add(5 * time.Second), FaultAt: t0.Add(7 * time.Second), End: t0.Add(9 * time.Second), Latencies: []Latency{
			{Device: "d2", Watcher: "w1", Bound: "owner_crash", Ms: 3000, BoundMs: 6850},
		}},
	}}
	rep.summarize()
	dir := t.TempDir()
	if err := rep.write(dir); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	s := string(page)
	if n := strings.Count(s, "<circle"); n != 3 {
		t.Fatalf("%d latency dots, want 3", n)
	}
	if n := strings.Count(s, `fill="#b00"`); n != 1 {
		t.Fatalf("%d dots past their bound, want d1's 1", n)
	}
	if !strings.Contains(s, "round 1: kill -9 n3 &lt;x&gt;") || strings.Count(s, `fill="#e8a33d"`) != 2 {
		t.Fatalf("fault timeline missing or unescaped:\n%s", s)
	}
	var out bytes.Buffer
	o := Options{Rounds: 3, Progress: &out}
	o.progress("round %d/%d: %s, %d/%d devices up", 1, o.Rounds, "kill", 29, 30)
	if !strings.Contains(out.String(), "chaos: round 1/3: kill, 29/30 devices up") {
		t.Fatalf("progress line %q", out.String())
	}
}
