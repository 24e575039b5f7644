package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// documented is the metric names of docs/operations.md's table, which
// cmd/presenced's TestMetricsTableMatchesNode ties to a node's /metrics.
func documented(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "## Metrics (`GET /metrics`)")
	table, _, _ = strings.Cut(table, "\n## ")
	var names []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(presence_[a-z_]+)").FindAllStringSubmatch(table, -1) {
		names = append(names, m[1])
	}
	if len(names) < 20 {
		t.Fatalf("%d metrics in docs/operations.md's table: the table was not found", len(names))
	}
	return names
}

var metricRef = regexp.MustCompile(`presence_[a-z_]+`)

// checkNames fails for each metric expr names that no node exports (a
// histogram's _bucket, _sum and _count series count as the histogram).
func checkNames(t *testing.T, where, expr string, known []string) {
	t.Helper()
	refs := metricRef.FindAllString(expr, -1)
	if len(refs) == 0 {
		t.Errorf("%s: %q names no presence metric", where, expr)
	}
	for _, ref := range refs {
		base := ref
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if s, ok := strings.CutSuffix(ref, suffix); ok && slices.Contains(known, s) {
				base = s
			}
		}
		if !slices.Contains(known, base) {
			t.Errorf("%s: %s is not a metric presence exports (docs/operations.md)", where, ref)
		}
	}
}

// The alert rules parse, name only metrics that exist, cover the alerts
// docs/operations.md promises, and pass promtool's check and unit tests.
func TestAlertRules(t *testing.T) {
	raw, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string } `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	known := documented(t)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			checkNames(t, r.Alert, r.Expr, known)
		}
	}
	doc, _ := os.ReadFile("../docs/operations.md")
	_, table, _ := strings.Cut(string(doc), "## Metrics (`GET /metrics`)")
	table, _, _ = strings.Cut(table, "\n## ")
	for _, a := range regexp.MustCompile(`\b(Presence[A-Z][A-Za-z]+)\b`).FindAllStringSubmatch(table, -1) {
		if !slices.Contains(alerts, a[1]) {
			t.Errorf("docs/operations.md names alert %s, which alerts.yaml does not have", a[1])
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("no promtool: `make tools` installs Debian's prometheus")
	}
	for _, args := range [][]string{{"check", "rules", "prometheus/alerts.yaml"}, {"test", "rules", "prometheus/alerts_test.yaml"}} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// The Grafana dashboard is JSON whose every query names metrics that
// exist.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/presence.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("presence.json: %v", err)
	}
	if dash.Title == "" || len(dash.Panels) < 8 {
		t.Fatalf("dashboard %q with %d panels", dash.Title, len(dash.Panels))
	}
	known := documented(t)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			checkNames(t, p.Title, q.Expr, known)
		}
	}
}
