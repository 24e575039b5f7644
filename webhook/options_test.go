package webhook

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/presence-im/presence/config"
)

// The webhook defaults an operator reads in presenced -h, in
// docs/operations.md and in docs/webhooks.md are DefaultLimits': none can
// drift from the one place they are set.
func TestFlagHelpShowsDefaultLimits(t *testing.T) {
	var usage bytes.Buffer
	if _, err := config.Load([]string{"-h"}, func(string) string { return "" }, &usage); err != flag.ErrHelp {
		t.Fatalf("config.Load -h: %v, want flag.ErrHelp", err)
	}
	help := func(name string) string {
		m := regexp.MustCompile(`-` + name + ` string\n\s+[^\n]*\(default ([^)]+)\)`).FindSubmatch(usage.Bytes())
		if m == nil {
			t.Fatalf("--%s help names no default", name)
		}
		return string(m[1])
	}
	d := DefaultLimits()
	if got, err := time.ParseDuration(help("webhook-retry-max")); err != nil || got != d.BackoffMax {
		t.Errorf("--webhook-retry-max help says default %s, DefaultLimits has %v", help("webhook-retry-max"), d.BackoffMax)
	}
	if got := help("webhook-backlog"); got != fmt.Sprint(d.MaxBacklog) {
		t.Errorf("--webhook-backlog help says default %s, DefaultLimits has %d", got, d.MaxBacklog)
	}
	for doc, rows := range map[string][]string{
		"../docs/operations.md": {
			"| `--webhook-retry-max` | " + short(d.BackoffMax) + " |",
			fmt.Sprintf("| `--webhook-backlog` | %d |", d.MaxBacklog),
		},
		"../docs/webhooks.md": {
			"| `--webhook-retry-max` | " + short(d.BackoffMax) + " |",
			fmt.Sprintf("| `--webhook-backlog` | %d |", d.MaxBacklog),
			fmt.Sprintf("a batch of at most %d\nevents", d.MaxBatch),
			fmt.Sprintf("timeouts, %d s) are\nretried with exponential back-off and full jitter from %d ms to", d.Timeout/time.Second, d.BackoffMin/time.Millisecond),
		},
	} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			if !bytes.Contains(b, []byte(row)) {
				t.Errorf("%s has no %q", doc, row)
			}
		}
	}
}

// short is a flag's duration as the tables write it: 1m, 5s, 100ms.
func short(d time.Duration) string {
	switch {
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}
