package dist

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// dashboardPanel is the part of a Grafana panel the test reads. Rows
// hold their panels inline when collapsed.
type dashboardPanel struct {
	ID      int              `json:"id"`
	Type    string           `json:"type"`
	Title   string           `json:"title"`
	Panels  []dashboardPanel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	// A metric name, with the label matchers of its selector if any.
	selector = regexp.MustCompile(`(nvmeof_tgt_[a-z_]+)(\{[^}]*\})?`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
)

// describedMetrics maps every metric name the collector describes to its
// labels.
func describedMetrics(t *testing.T) map[string][]string {
	ch := make(chan *prometheus.Desc)
	go func() {
		(&metrics.Collector{}).Describe(ch)
		close(ch)
	}()
	metrics := map[string][]string{}
	for d := range ch {
		s := d.String()
		m := descName.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("no fqName in %s", s)
		}
		var labels []string
		if l := descLabels.FindStringSubmatch(s); l != nil && l[1] != "" {
			labels = strings.Split(l[1], ",")
		}
		metrics[m[1]] = labels
	}
	return metrics
}

// TestDashboard keeps the shipped dashboard in step with the metrics the
// daemon serves: a renamed metric or label would otherwise leave a panel
// silently empty.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		SchemaVersion int              `json:"schemaVersion"`
		Panels        []dashboardPanel `json:"panels"`
		Templating    struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.SchemaVersion != 39 {
		t.Errorf("schemaVersion %d, want 39", dash.SchemaVersion)
	}
	var vars []string
	for _, v := range dash.Templating.List {
		vars = append(vars, v.Name)
	}
	for _, want := range []string{"DS_PROMETHEUS", "subsystem", "nsid"} {
		if !slices.Contains(vars, want) {
			t.Errorf("no templating variable %q (have %q)", want, vars)
		}
	}

	metrics := describedMetrics(t)
	var panels []dashboardPanel
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			if p.Type != "row" {
				panels = append(panels, p)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	if len(panels) < 10 {
		t.Errorf("%d panels, want at least 10", len(panels))
	}

	ids := map[int]string{}
	for _, p := range panels {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panel %q reuses id %d of %q", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			for _, problem := range exprProblems(metrics, tg.Expr) {
				t.Errorf("panel %q: %s", p.Title, problem)
			}
		}
	}
}

// exprProblems lists what is wrong with a PromQL expression against the
// metrics the collector describes: no nvmeof_tgt_ metric at all, a
// metric it does not serve, or a label matcher on a label it lacks.
func exprProblems(metrics map[string][]string, expr string) []string {
	found := selector.FindAllStringSubmatch(expr, -1)
	if len(found) == 0 {
		return []string{fmt.Sprintf("%q uses no nvmeof_tgt_ metric", expr)}
	}
	var problems []string
	for _, m := range found {
		name, labels, ok := lookupMetric(metrics, m[1])
		if !ok {
			problems = append(problems, fmt.Sprintf("%s is not a metric the collector describes", m[1]))
			continue
		}
		// Scrape targets add instance and job; histogram buckets add le.
		allowed := append([]string{"instance", "job", "le"}, labels...)
		for _, lm := range matcher.FindAllStringSubmatch(m[2], -1) {
			if !slices.Contains(allowed, lm[1]) {
				problems = append(problems, fmt.Sprintf("%s has no label %q (has %q)", name, lm[1], labels))
			}
		}
	}
	return problems
}

// lookupMetric finds ref among the described metrics, reading a
// histogram's _bucket, _sum and _count series as the histogram itself.
func lookupMetric(metrics map[string][]string, ref string) (string, []string, bool) {
	if labels, ok := metrics[ref]; ok {
		return ref, labels, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(ref, suffix); ok {
			if labels, ok := metrics[base]; ok {
				return base, labels, true
			}
		}
	}
	return "", nil, false
}
