package chaos

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A view's margin runs from its last device up while unsettled to its
// settle, per node and user; a view that settled with no device up, or
// one that was never unsettled, has none, and a node's restart in the same
// log forgets the ups of views that never settled.
func TestSettleMargins(t *testing.T) {
	dir := t.TempDir()
	logs := map[string]string{
		"round-0/n1.log": `time=2026-12-06T06:41:52.000Z level=DEBUG msg="view: published" node=n1 user=a status=online devices=1 unsettled=true
time=2026-12-06T06:41:52.100Z level=DEBUG msg="view: published" node=n1 user=a status=online devices=2 unsettled=true
time=2026-12-06T06:41:52.300Z level=DEBUG msg="view: published" node=n1 user=b status=online devices=1 unsettled=false
time=2026-12-06T06:41:52.720Z level=DEBUG msg="view: settled" node=n1 user=a devices=2 online=true subscribers=2
time=2026-12-06T06:41:53.000Z level=DEBUG msg="view: settled" node=n1 user=c devices=0 online=false subscribers=1
`,
		"round-1/n2.log": `time=2026-12-06T06:41:50.000Z level=DEBUG msg="view: published" node=n2 user=a status=online devices=1 unsettled=true
time=2026-12-06T06:41:59.000Z level=INFO msg="node started" node=n2 listen=127.0.0.1:1
time=2026-12-06T06:42:01.000Z level=DEBUG msg="view: settled" node=n2 user=a devices=0 online=false subscribers=1
time=2026-12-06T06:42:00.000Z level=DEBUG msg="view: published" node=n2 user=a status=online devices=1 unsettled=true
time=2026-12-06T06:42:01.500Z level=INFO msg="member failed" node=n2 member=n3
time=2026-12-06T06:42:01.550Z level=DEBUG msg="view: settled" node=n2 user=a devices=1 online=true subscribers=1
`,
	}
	for name, text := range logs {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := SettleMargins(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{620 * time.Millisecond, 1550 * time.Millisecond}; !slices.Equal(got, want) {
		t.Fatalf("margins %v, want %v", got, want)
	}
}
