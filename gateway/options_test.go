package gateway

import (
	"bytes"
	"flag"
	"fmt"
	"regexp"
	"testing"

	"github.com/presence-im/presence/config"
)

// The defaults an operator reads in presenced -h are DefaultOptions': the
// flags' help cannot drift from the one place the defaults are set.
func TestFlagHelpShowsDefaultOptions(t *testing.T) {
	var usage bytes.Buffer
	if _, err := config.Load([]string{"-h"}, func(string) string { return "" }, &usage); err != flag.ErrHelp {
		t.Fatalf("config.Load -h: %v, want flag.ErrHelp", err)
	}
	d := DefaultOptions()
	for name, want := range map[string]string{
		"outbox":        fmt.Sprint(d.Outbox),
		"write-timeout": d.WriteTimeout.String(),
		"admit-rate":    fmt.Sprint(d.AdmitRate),
		"admit-burst":   fmt.Sprint(d.AdmitBurst),
		"drain-spread":  d.DrainSpread.String(),
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
}
