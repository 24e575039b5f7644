package chaos

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// --groups: sizes joined by +, at least two sides of at least one node.
func TestParseGroups(t *testing.T) {
	for in, want := range map[string][]int{"4+5": {4, 5}, "3+3+3": {3, 3, 3}, "2+2+1": {2, 2, 1}, " 1 + 8 ": {1, 8}} {
		if got, err := ParseGroups(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseGroups(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "9", "4+0", "4+-1", "a+b", "4++5"} {
		if _, err := ParseGroups(bad); err == nil || !strings.Contains(err.Error(), "--groups") {
			t.Errorf("ParseGroups(%q): %v, want an error naming --groups", bad, err)
		}
	}
}

// --groups sets the node count; --kills defaults by size and must leave
// one node serving.
func TestValidSize(t *testing.T) {
	part, _ := Find("partition")
	o := Options{Scenario: "partition", Nodes: 3, Groups: "3+3+3"}
	if err := o.validSize(part); err != nil || o.Nodes != 9 || !slices.Equal(o.groups, []int{3, 3, 3}) {
		t.Fatalf("partition --groups 3+3+3: %v, nodes %d, groups %v", err, o.Nodes, o.groups)
	}
	gc, _ := Find("gateway-crash")
	if err := (&Options{Nodes: 9, Groups: "4+5"}).validSize(gc); err == nil {
		t.Fatal("--groups accepted for gateway-crash")
	}
	seq, _ := Find("kill-seq")
	for _, c := range []struct{ nodes, kills, want int }{{9, 0, 3}, {5, 0, 3}, {4, 0, 2}, {3, 0, 2}, {9, 8, 8}} {
		o := Options{Nodes: c.nodes, Kills: c.kills}
		if err := o.validSize(seq); err != nil || o.Kills != c.want {
			t.Errorf("kill-seq --nodes %d --kills %d: %v, kills %d, want %d", c.nodes, c.kills, err, o.Kills, c.want)
		}
	}
	if err := (&Options{Nodes: 3, Kills: 3}).validSize(seq); err == nil {
		t.Fatal("kill-seq killing every node accepted")
	}
}

// Sides are cut from the nodes rotated by the round; the majority rule's
// serving side holds more than half, or half with the oldest.
func TestCutAndServingSide(t *testing.T) {
	var nodes []*Node
	for _, id := range []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"} {
		nodes = append(nodes, &Node{ID: id})
	}
	ss := cut(nodes, []int{4, 5}, 1)
	if sideNames(ss) != "{n2,n3,n4,n5} {n6,n7,n8,n9,n1}" {
		t.Fatalf("cut 4+5, round 1: %s", sideNames(ss))
	}
	if s := servingSide(nodes, ss); sideNames([][]*Node{s}) != "{n6,n7,n8,n9,n1}" {
		t.Fatalf("4+5 serving: %v", sideNames([][]*Node{s}))
	}
	if s := servingSide(nodes, cut(nodes, []int{3, 3, 3}, 0)); s != nil {
		t.Fatalf("3+3+3: %s serves, want none", sideNames([][]*Node{s}))
	}
	if s := servingSide(nodes[:4], cut(nodes[:4], []int{2, 2}, 1)); sideNames([][]*Node{s}) != "{n4,n1}" {
		t.Fatalf("2+2: %s serves, want the oldest's side", sideNames([][]*Node{s}))
	}
}

// --hold-back only where the last side can take the lease first: under the
// lease, with no side holding a majority; otherwise a clear error and no
// node frozen (these nodes have no process: a Pause would panic).
func TestHoldBackRefusesWhatItCannotDo(t *testing.T) {
	var nodes []*Node
	for _, id := range []string{"n1", "n2", "n3", "n4", "n5"} {
		nodes = append(nodes, &Node{ID: id})
	}
	e := &Env{Cluster: &Cluster{Nodes: nodes}, holdBack: time.Second}
	r := &Round{}
	if err := e.holdBackAllBut(t.Context(), r, cut(nodes, []int{3, 2}, 0)); err == nil || !strings.Contains(err.Error(), "{n1,n2,n3} holds a majority") {
		t.Fatalf("3+2: %v, want an error naming the majority", err)
	}
	if len(r.Notes) != 0 {
		t.Fatalf("notes %q after refusals", r.Notes)
	}
	// Before anything starts: a scenario that does not cut under the lease.
	for _, name := range []string{"gateway-crash", "partition-2-2-1", "partition-lease"} {
		sc, _ := Find(name)
		dir := filepath.Join(t.TempDir(), "report")
		o := Options{Scenario: name, Nodes: 3, Devices: 10, Rounds: 1, HoldBack: time.Second, Report: dir}
		if err := o.prepare(t.Context(), sc); err == nil || !strings.Contains(err.Error(), "--hold-back") {
			t.Fatalf("%s: %v, want an error naming --hold-back", name, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("%s: the report directory was made before the refusal", name)
		}
	}
}
