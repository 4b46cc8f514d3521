package rdma

import (
	"maps"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// RejectKey says where and why the transport refused a connection at the
// RDMA CM level, before any NVMe Connect command.
type RejectKey struct {
	Port   uint16
	Reason string // no_resources, port_closing, or the private data fault (invalid_hsqsize ...)
}

// DeviceEventKey is an RDMA device event: an asynchronous verbs event
// (ibv_event_type_str) or an rdma_cm device removal or address change.
type DeviceEventKey struct {
	Device string
	Event  string
}

var stats struct {
	mu      sync.Mutex
	rejects map[RejectKey]uint64
	events  map[DeviceEventKey]uint64
}

func countReject(port uint16, reason string) {
	stats.mu.Lock()
	defer stats.mu.Unlock()
	if stats.rejects == nil {
		stats.rejects = map[RejectKey]uint64{}
	}
	stats.rejects[RejectKey{port, reason}]++
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
func Rejects() map[RejectKey]uint64 {
	stats.mu.Lock()
	defer stats.mu.Unlock()
	return maps.Clone(stats.rejects)
}

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
