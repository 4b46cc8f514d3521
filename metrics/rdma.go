//go:build cgo

package metrics

import (
	"strconv"

	"github.com/nvmeof-tgt/nvmeof-tgt/rdma"
	"github.com/prometheus/client_golang/prometheus"
)

// collectRDMA sends the transport's process-wide counters.
func collectRDMA(e emit) {
	e.gauge(dRegistered, float64(rdma.RegisteredBytes()))
	busy, idle := rdma.PollerSeconds()
	e.counter(dPoller, busy, "busy")
	e.counter(dPoller, idle, "idle")
	e.counter(dViolations, float64(rdma.InvalidTransitions()))
	for _, p := range rdma.Pools() {
		e.gauge(dPoolSize, float64(p.Size), p.Device)
		e.gauge(dPoolInUse, float64(p.InUse), p.Device)
		e.counter(dPoolWaits, float64(p.Waits), p.Device)
		e.gauge(dPoolShare, float64(p.Share), p.Device)
		e.counter(dPoolOver, float64(p.OverShare), p.Device)
	}
	counts, sum := rdma.SetupTimes()
	buckets := make(map[float64]uint64, len(rdma.SetupBuckets))
	var total uint64
	for i, ub := range rdma.SetupBuckets {
		total += counts[i]
		buckets[ub] = total
	}
	total += counts[len(rdma.SetupBuckets)]
	e.ch <- prometheus.MustNewConstHistogram(dQPSetup, total, sum, buckets)
	for k, n := range rdma.Rejects() {
		e.counter(dCMRejects, float64(n), strconv.Itoa(int(k.Port)), k.Reason)
	}
	for k, n := range rdma.DeviceEvents() {
		e.counter(dDevEvents, float64(n), k.Device, k.Event)
	}
	collectSRQ(e)
	for port, n := range rdma.QueueOverruns() {
		e.counter(dOverruns, float64(n), strconv.Itoa(int(port)))
	}
}

// collectSRQ sends the shared receive queues' figures: every device in use
// has its event counters, zero until the first event, so that a check for
// "no limit reached" finds a series.
func collectSRQ(e emit) {
	limits, errors := rdma.SRQEvents()
	devices := map[string]bool{}
	for _, s := range rdma.SharedReceiveQueues() {
		e.gauge(dSRQEntries, float64(s.Entries), s.Device, s.Queue)
		e.gauge(dSRQPosted, float64(s.Posted), s.Device, s.Queue)
		devices[s.Device] = true
	}
	for d := range limits {
		devices[d] = true
	}
	for d := range errors {
		devices[d] = true
	}
	for d := range devices {
		e.counter(dSRQLimits, float64(limits[d]), d)
		e.counter(dSRQErrors, float64(errors[d]), d)
	}
}
