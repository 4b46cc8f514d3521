package dist

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const (
	alertRules   = "nvmeof-tgt-alerts.yml"
	scrapeConfig = "prometheus-scrape.yml"
	alertTests   = "testdata/alerts-test.yml"
)

// TestAlertRulesUseServedMetrics keeps the shipped alert rules in step
// with the collector: an alert on a renamed metric would never fire.
func TestAlertRulesUseServedMetrics(t *testing.T) {
	data, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	metrics := describedMetrics(t)
	alerts := map[string]bool{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if r.Alert == "NvmeofTgtDown" {
				continue // up is Prometheus's own
			}
			for _, problem := range exprProblems(metrics, r.Expr) {
				t.Errorf("alert %s: %s", r.Alert, problem)
			}
		}
	}
	// What an operator was promised (docs/operations.md, "Alerts").
	for _, want := range []string{"NvmeofTgtDown", "NvmeofTgtReloadFailed", "NvmeofTgtKeepAliveExpired",
		"NvmeofTgtConnectsRefused", "NvmeofTgtRDMAConnectionsRejected", "NvmeofTgtMediaErrors", "NvmeofTgtCommandErrors"} {
		if !alerts[want] {
			t.Errorf("no alert %s in %s", want, alertRules)
		}
	}
}

// TestAlertRulesPromtool checks the rules and the scrape example with
// Prometheus's own checker and runs the rules' unit tests (series in,
// alerts out).
func TestAlertRulesPromtool(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", alertRules},
		{"check", "config", scrapeConfig},
		{"test", "rules", alertTests},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// needTool returns the path of a command a test runs. test/run-tests.sh
// sets NVMEOF_REQUIRE_TOOLS (test/install-deps.sh installs them), so a
// missing one fails CI; a developer without it sees a NOT RUN line naming
// the Debian package.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	switch {
	case err == nil:
		return path
	case os.Getenv("NVMEOF_REQUIRE_TOOLS") != "":
		t.Fatalf("%s is missing (Debian package %s; test/install-deps.sh installs it): %v", name, pkg, err)
	default:
		t.Skipf("NOT RUN: %s is missing (Debian: apt-get install %s); test/run-tests.sh requires it", name, pkg)
	}
	return ""
}
