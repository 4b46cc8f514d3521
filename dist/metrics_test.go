package dist

import (
	"slices"
	"testing"
)

// The shared receive queue and overrun metrics keep these names and
// labels: the churn scenario (test/e2e/scenarios/81-churn.sh) and
// dashboards read them.
func TestRDMASRQMetricNames(t *testing.T) {
	metrics := describedMetrics(t)
	for name, labels := range map[string][]string{
		"nvmeof_tgt_rdma_srq_entries":            {"device", "queue"},
		"nvmeof_tgt_rdma_srq_posted_entries":     {"device", "queue"},
		"nvmeof_tgt_rdma_srq_limit_events_total": {"device"},
		"nvmeof_tgt_rdma_srq_errors_total":       {"device"},
		"nvmeof_tgt_rdma_queue_overruns_total":   {"port"},
	} {
		got, ok := metrics[name]
		if !ok {
			t.Errorf("%s is not described", name)
			continue
		}
		if !slices.Equal(got, labels) {
			t.Errorf("%s labels %q, want %q", name, got, labels)
		}
	}
}
