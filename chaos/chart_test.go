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
		{Index: 0, Fault: "kill -9 n2", Start: t0, FaultAt: t0.Add(2 * time.Second), End: t0.Add(5 * time.Second), Faults: []Mark{
			{At: t0.Add(2500 * time.Millisecond), Node: "n2", What: "kill"}, {At: t0.Add(4 * time.Second), Node: "n2", What: "start"},
		}, Latencies: []Latency{
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
	// each fault a tick at its own moment: 2.5 s of the 5 s round is half
	// of the row's 830 px after its 10 px margin
	if n := strings.Count(s, `<line class="fault"`); n != 2 || !strings.Contains(s, `<line class="fault" x1="425.0"`) || !strings.Contains(s, "kill n2 at 12:00:02.500 (+2.500 s)") ||
		!strings.Contains(s, "12:00:04.000 start n2;") {
		t.Fatalf("%d fault ticks, want the kill at x=425 and the start, listed with their times:\n%s", n, s)
	}
	var out bytes.Buffer
	o := Options{Rounds: 3, Progress: &out}
	o.progress("round %d/%d: %s, %d/%d devices up", 1, o.Rounds, "kill", 29, 30)
	if !strings.Contains(out.String(), "chaos: round 1/3: kill, 29/30 devices up") {
		t.Fatalf("progress line %q", out.String())
	}
}

// stopped is a runner that only records the signals it was given.
type stopped struct{ got []string }

func (s *stopped) kill()                  { s.got = append(s.got, "kill") }
func (s *stopped) terminate() error       { s.got = append(s.got, "terminate"); return nil }
func (s *stopped) pause() error           { s.got = append(s.got, "pause"); return nil }
func (s *stopped) resume() error          { s.got = append(s.got, "resume"); return nil }
func (s *stopped) quit() error            { s.got = append(s.got, "quit"); return nil }
func (s *stopped) alive() bool            { return false }
func (s *stopped) exitErr() error         { return nil }
func (s *stopped) collect(string, string) {}

// Every fault injected through a node is marked at its moment; the kills
// of Stop, the end of the run, are not faults.
func TestFaultsAreMarked(t *testing.T) {
	c := &Cluster{}
	run := &stopped{}
	n := &Node{ID: "n2", run: run, marks: &c.marks}
	c.Nodes = []*Node{n}
	before := time.Now()
	n.Kill()
	_ = n.Pause()
	_ = n.Resume()
	_ = n.Terminate()
	c.Stop()
	var got []string
	for _, m := range c.Marks(before) {
		if m.At.Before(before) || m.Node != "n2" {
			t.Fatalf("mark %+v", m)
		}
		got = append(got, m.What)
	}
	if strings.Join(got, " ") != "kill pause resume terminate" || strings.Join(run.got, " ") != "kill pause resume terminate kill" {
		t.Fatalf("marks %v for signals %v, want kill pause resume terminate (not Stop's kill)", got, run.got)
	}
	if len(c.Marks(time.Now().Add(time.Second))) != 0 {
		t.Fatal("marks after a time to come")
	}
}
