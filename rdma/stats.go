package rdma

import (
	"maps"
	"slices"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// rejects counts connections the transport refused at the RDMA CM level,
// before any NVMe Connect command, by reason (no_resources, port_closing,
// place_refused, or the private data fault such as invalid_hsqsize) and
// port.
var rejects fabrics.Refusals

// placeRefused is the reject reason when fabrics gives the queue pair no
// place: the daemon's limit or the peer address's cap, which fabrics
// counts apart.
const placeRefused = "place_refused"

// DeviceEventKey is an RDMA device event: an asynchronous verbs event
// (ibv_event_type_str) or an rdma_cm device removal or address change.
type DeviceEventKey struct {
	Device string
	Event  string
}

var stats struct {
	mu     sync.Mutex
	events map[DeviceEventKey]uint64
	// Shared receive queue events by device: IBV_EVENT_SRQ_LIMIT_REACHED
	// and IBV_EVENT_SRQ_ERR.
	srqLimits, srqErrors map[string]uint64
	// Hosts that sent more commands than their queue holds, by port.
	overruns map[uint16]uint64
}

func countDeviceEvent(dev, event string) {
	stats.mu.Lock()
	defer stats.mu.Unlock()
	if stats.events == nil {
		stats.events = map[DeviceEventKey]uint64{}
	}
	stats.events[DeviceEventKey{dev, event}]++
}

func countSRQEvent(dev string, failed bool) {
	stats.mu.Lock()
	defer stats.mu.Unlock()
	m := &stats.srqLimits
	if failed {
		m = &stats.srqErrors
	}
	if *m == nil {
		*m = map[string]uint64{}
	}
	(*m)[dev]++
}

// countOverrun counts a host dropped for sending past its queue size.
func countOverrun(port uint16) {
	stats.mu.Lock()
	defer stats.mu.Unlock()
	if stats.overruns == nil {
		stats.overruns = map[uint16]uint64{}
	}
	stats.overruns[port]++
}

// QueueOverruns counts, by port, the queues dropped because the host sent
// more commands than the queue size it asked for.
func QueueOverruns() map[uint16]uint64 {
	stats.mu.Lock()
	defer stats.mu.Unlock()
	return maps.Clone(stats.overruns)
}

// SRQStats is one shared receive queue of a device: its entries and how
// many are posted, free for hosts' commands.
type SRQStats struct {
	Device, Queue   string // queue: io or admin
	Entries, Posted int64
}

// SharedReceiveQueues reports the shared receive queues of every device in
// use, summed by device and queue kind (ports of different in-capsule
// sizes have an I/O queue each).
func SharedReceiveQueues() []SRQStats {
	devicesMu.Lock()
	devs := slices.Collect(maps.Values(devices))
	devicesMu.Unlock()
	var out []SRQStats
	for _, d := range devs {
		out = append(out, d.srqStats()...)
	}
	return out
}

func (d *device) srqStats() []SRQStats {
	d.ringsMu.Lock()
	defer d.ringsMu.Unlock()
	var io, admin SRQStats
	for _, r := range d.rings {
		s := &io
		if r.admin {
			s = &admin
		}
		s.Entries += int64(len(r.cmd))
		s.Posted += r.posted.Load()
	}
	var out []SRQStats
	for _, s := range []SRQStats{{Device: d.name, Queue: "io", Entries: io.Entries, Posted: io.Posted},
		{Device: d.name, Queue: "admin", Entries: admin.Entries, Posted: admin.Posted}} {
		if s.Entries > 0 {
			out = append(out, s)
		}
	}
	return out
}

// SRQEvents counts, by device, IBV_EVENT_SRQ_LIMIT_REACHED (limits) and
// IBV_EVENT_SRQ_ERR (errors).
func SRQEvents() (limits, errors map[string]uint64) {
	stats.mu.Lock()
	defer stats.mu.Unlock()
	return maps.Clone(stats.srqLimits), maps.Clone(stats.srqErrors)
}

// Rejects counts the connections refused so far.
func Rejects() map[fabrics.RefusedKey]uint64 { return rejects.Counts() }

// DeviceEvents counts the device events seen so far.
func DeviceEvents() map[DeviceEventKey]uint64 {
	stats.mu.Lock()
	defer stats.mu.Unlock()
	return maps.Clone(stats.events)
}

// rejectReason names a CM reject status for the metric.
func rejectReason(status uint16) string {
	switch status {
	case nvme.CMRejectInvalidLength:
		return "invalid_length"
	case nvme.CMRejectInvalidRecFmt:
		return "invalid_recfmt"
	case nvme.CMRejectInvalidQID:
		return "invalid_qid"
	case nvme.CMRejectInvalidHSQSize:
		return "invalid_hsqsize"
	case nvme.CMRejectInvalidHRQSize:
		return "invalid_hrqsize"
	case nvme.CMRejectNoResources:
		return "no_resources"
	case nvme.CMRejectInvalidIRD:
		return "invalid_ird"
	case nvme.CMRejectInvalidORD:
		return "invalid_ord"
	case nvme.CMRejectInvalidCNTLID:
		return "invalid_cntlid"
	}
	return "other"
}

// PoolStats is one device's shared data buffer pool.
type PoolStats struct {
	Device      string
	Size, InUse int64
	Waits       uint64 // requests that found the pool dry and waited
	Share       int64  // each I/O queue pair's share of the main region (share.go)
	OverShare   uint64 // requests that waited on their queue pair past its share
}

// Pools reports the buffer pool of every device in use.
func Pools() []PoolStats {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	var out []PoolStats
	for _, d := range devices {
		if d.pool != nil {
			out = append(out, PoolStats{Device: d.name, Size: d.pool.size(), InUse: d.pool.inUse.Load(), Waits: d.pool.waits.Load(),
				Share: d.pool.share.Load(), OverShare: d.pool.overShare.Load()})
		}
	}
	return out
}

// SetupBuckets are the upper bounds, in seconds, of the queue pair set-up
// time histogram: from the connection request to the accept.
var SetupBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}

var setupHist struct {
	mu     sync.Mutex
	counts []uint64 // per bucket, the last for above every bound
	sum    float64
}

func observeSetup(seconds float64) {
	setupHist.mu.Lock()
	defer setupHist.mu.Unlock()
	if setupHist.counts == nil {
		setupHist.counts = make([]uint64, len(SetupBuckets)+1)
	}
	i := 0
	for i < len(SetupBuckets) && seconds > SetupBuckets[i] {
		i++
	}
	setupHist.counts[i]++
	setupHist.sum += seconds
}

// SetupTimes returns the set-up time histogram: a count per bucket of
// SetupBuckets (not cumulative) plus one above them, and the sum.
func SetupTimes() ([]uint64, float64) {
	setupHist.mu.Lock()
	defer setupHist.mu.Unlock()
	out := make([]uint64, len(SetupBuckets)+1)
	copy(out, setupHist.counts)
	return out, setupHist.sum
}
