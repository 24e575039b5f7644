package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestListAndUsage(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"list"}, &out, &errs); code != 0 || !strings.Contains(out.String(), "gateway-crash") || !strings.Contains(out.String(), "pause") {
		t.Fatalf("list: %d %q", code, out.String())
	}
	for _, args := range [][]string{nil, {"explode"}, {"run", "--backend", "vm", "--scenario", "close"}, {"run", "--scenario", "nope"}, {"run", "--scenario", "close", "--nodes", "2"}, {"run", "--scenario", "join", "--load", "10"}, {"run", "--scenario", "close", "--load", "10", "--load-timing", "slow"},
		{"run", "--scenario", "close", "--groups", "4+5"}, {"run", "--scenario", "partition", "--groups", "9"}, {"run", "--scenario", "partition", "--groups", "4+0"},
		{"run", "--scenario", "kill-seq", "--nodes", "3", "--kills", "3"}, {"run", "--scenario", "close", "--kills", "2"}} {
		errs.Reset()
		if code := run(args, &out, &errs); code != 2 || errs.Len() == 0 {
			t.Fatalf("%v: exit %d, stderr %q: want 2 and a reason", args, code, errs.String())
		}
	}
}

// --node-flags reaches every node, --faults picks soak's faults.
func TestRunFlagsForNodesAndFaults(t *testing.T) {
	o, ok := runFlags([]string{"--scenario", "soak", "--node-flags", "--debounce 1s", "--faults", "kill -9, restart;partition 2+1, heal"}, io.Discard)
	if !ok || strings.Join(o.Args, "|") != "--debounce|1s" || len(o.Faults) != 2 || o.Faults[1] != "partition 2+1, heal" {
		t.Fatalf("ok %v, args %q, faults %q", ok, o.Args, o.Faults)
	}
}

// margins needs a directory; one without debug logs says so, and exits 0.
func TestMargins(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"margins"}, &out, &errs); code != 2 || errs.Len() == 0 {
		t.Fatalf("no directory: exit %d, stderr %q: want 2 and a reason", code, errs.String())
	}
	dir := t.TempDir()
	if code := run([]string{"margins", dir}, &out, &errs); code != 0 || !strings.Contains(out.String(), "no re-created view") {
		t.Fatalf("empty report: exit %d, stdout %q", code, out.String())
	}
}
