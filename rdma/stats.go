package rdma

import (
	"maps"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// rejects counts connections the transport refused at the RDMA CM level,
// before any NVMe Connect command, by reason (no_resources, port_closing,
// queue_pair_limit, or the private data fault such as invalid_hsqsize) and
// port.
var rejects fabrics.Refusals

// DeviceEventKey is an RDMA device event: an asynchronous verbs event
// (ibv_event_type_str) or an rdma_cm device removal or address change.
type DeviceEventKey struct {
	Device string
	Event  string
}

var stats struct {
	mu     sync.Mutex
	events map[DeviceEventKey]uint64
}

func countDeviceEvent(dev, event string) {
	stats.mu.Lock()
	defer stats.mu.Unlock()
	if stats.events == nil {
		stats.events = map[DeviceEventKey]uint64{}
	}
	stats.events[DeviceEventKey{dev, event}]++
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
}

// Pools reports the buffer pool of every device in use.
func Pools() []PoolStats {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	var out []PoolStats
	for _, d := range devices {
		if d.pool != nil {
			out = append(out, PoolStats{Device: d.name, Size: d.pool.size(), InUse: d.pool.inUse.Load(), Waits: d.pool.waits.Load()})
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
