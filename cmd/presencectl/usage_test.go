package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// A wrong command line exits 2 with the usage and sends nothing: an
// unknown command, and the argument-less admin commands given an argument
// (the admin URL points nowhere, so a request would fail with 1).
func TestWrongCommandLineExits2(t *testing.T) {
	for _, args := range [][]string{
		{"nosuch"},
		{"ready", "--admin", "http://127.0.0.1:1", "extra"},
		{"serve-alone", "--admin", "http://127.0.0.1:1", "extra"},
		{"ready", "--nosuch-flag"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "usage") || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and the usage", args, code, out.String(), errOut.String())
		}
	}
}

// --ws and --admin lists drop spaces around the commas and empty items.
func TestSplitList(t *testing.T) {
	got := splitList(" ws://a:1/ws, ,ws://b:2/ws ,")
	if want := []string{"ws://a:1/ws", "ws://b:2/ws"}; !slices.Equal(got, want) {
		t.Fatalf("splitList = %q, want %q", got, want)
	}
	if got := splitList(""); len(got) != 0 {
		t.Fatalf("splitList of nothing = %q, want none", got)
	}
}
