package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Sample is one series of a scraped metric: its labels and its value (a
// gauge's or a counter's).
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Scrape gathers c through a pedantic registry, which fails the test on
// an inconsistent collector, and returns the series of the metric name.
func Scrape(t testing.TB, c prometheus.Collector, name string) []Sample {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []Sample
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sm := Sample{Labels: map[string]string{}, Value: m.GetGauge().GetValue() + m.GetCounter().GetValue()}
			for _, l := range m.GetLabel() {
				sm.Labels[l.GetName()] = l.GetValue()
			}
			out = append(out, sm)
		}
	}
	return out
}
