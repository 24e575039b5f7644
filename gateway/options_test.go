package gateway

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/presence-im/presence/config"
)

// The defaults an operator reads in presenced -h and in docs/operations.md
// are DefaultOptions': neither can drift from the one place the defaults
// are set.
func TestFlagHelpShowsDefaultOptions(t *testing.T) {
	var usage bytes.Buffer
	if _, err := config.Load([]string{"-h"}, func(string) string { return "" }, &usage); err != flag.ErrHelp {
		t.Fatalf("config.Load -h: %v, want flag.ErrHelp", err)
	}
	d, l := DefaultOptions(), config.DefaultLimits()
	for name, want := range map[string]string{
		"outbox":            fmt.Sprint(d.Outbox),
		"write-timeout":     d.WriteTimeout.String(),
		"admit-rate":        fmt.Sprint(d.AdmitRate),
		"admit-burst":       fmt.Sprint(d.AdmitBurst),
		"drain-spread":      d.DrainSpread.String(),
		"subscribe-rate":    fmt.Sprint(d.SubscribeRate),
		"subscribe-burst":   fmt.Sprint(d.SubscribeBurst),
		"max-subscriptions": fmt.Sprint(l.Subscriptions),
		"max-devices":       fmt.Sprint(l.Devices),
		"max-batch":         fmt.Sprint(l.Batch),
	} {
		m := regexp.MustCompile(`-` + name + ` string\n\s+[^\n]*\(default ([^)]+)\)`).FindSubmatch(usage.Bytes())
		got := "(none)"
		if m != nil {
			got = string(m[1])
		}
		if got != want {
			t.Errorf("--%s help says default %s, DefaultOptions has %s", name, got, want)
		}
	}
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{
		fmt.Sprintf("| `--outbox` | %d |", d.Outbox),
		fmt.Sprintf("| `--write-timeout` | %s |", d.WriteTimeout),
		fmt.Sprintf("| `--admit-rate` / `--admit-burst` | %v / %d |", d.AdmitRate, d.AdmitBurst),
		fmt.Sprintf("| `--drain-spread` | %s |", d.DrainSpread),
		fmt.Sprintf("| `--subscribe-rate` / `--subscribe-burst` | %v / %d |", d.SubscribeRate, d.SubscribeBurst),
		fmt.Sprintf("| `--max-subscriptions` | %d |", l.Subscriptions),
		fmt.Sprintf("| `--max-devices` | %d |", l.Devices),
		fmt.Sprintf("| `--max-batch` | %d |", l.Batch),
	} {
		if !bytes.Contains(doc, []byte(row)) {
			t.Errorf("docs/operations.md has no row %q", row)
		}
	}
}
