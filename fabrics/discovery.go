package fabrics

import (
	"strconv"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// adminQueueSize is the admin submission queue size advertised in
// discovery entries (ASQSZ), the size the Linux host uses.
const adminQueueSize = 32

// discoveryLog builds the discovery log page for the queue's host: one
// entry for the discovery subsystem itself, then one per subsystem on the
// queue's port that the host may connect to.
func (q *Queue) discoveryLog(page []byte) []byte {
	host := q.ctrl.HostNQN
	var subs []*Subsystem
	for _, s := range q.target.Subsystems() {
		if s.OnPort(q.port.ID) && s.HostAllowed(host) {
			subs = append(subs, s)
		}
	}
	n := 1 + len(subs)
	page = grow(page, nvme.DiscoveryHdrSize+n*nvme.DiscoveryEntSize)
	nvme.PutDiscoveryHeader(page, q.target.genctr.Load(), uint64(n))
	e := nvme.DiscoveryEntry{
		TransportType: nvme.TransportRDMA,
		AddrFamily:    nvme.AddrFamilyIPv4,
		PortID:        q.port.ID,
		CNTLID:        nvme.ControllerIDDynamic,
		ASQSZ:         adminQueueSize,
		TRSVCID:       strconv.Itoa(int(q.port.ServiceID)),
		TRADDR:        q.port.Address.String(),
	}
	if q.port.Address.Is6() && !q.port.Address.Is4In6() {
		e.AddrFamily = nvme.AddrFamilyIPv6
	}
	off := nvme.DiscoveryHdrSize
	e.Subtype, e.SubNQN = nvme.SubtypeCurrentDiscovery, nvme.DiscoveryNQN
	e.Encode(page[off:])
	for _, s := range subs {
		off += nvme.DiscoveryEntSize
		e.Subtype, e.SubNQN = nvme.SubtypeNVM, s.NQN
		e.Encode(page[off:])
	}
	return page
}
