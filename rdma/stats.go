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
