package fabrics

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// adminQueueSize is the admin submission queue size advertised in
// discovery entries (ASQSZ), the size the Linux host uses.
const adminQueueSize = 32

// Referral is another discovery service that a port's discovery log points
// hosts to: typically the port of a second daemon serving the same
// subsystems, so that one `nvme connect-all` finds every path.
type Referral struct {
	Transport uint8 // TRTYPE (nvme.TransportRDMA when 0)
	Address   netip.Addr
	ServiceID uint16 // trsvcid
}

// SetReferrals replaces the referrals in port id's discovery log. When
// they change, the log's generation counter moves and the discovery
// controllers connected through that port get the discovery log change
// event, as the Linux target raises it for a referral added or removed.
func (t *Target) SetReferrals(id uint16, refs []Referral) error {
	t.mu.Lock()
	if _, ok := t.ports[id]; !ok {
		t.mu.Unlock()
		return fmt.Errorf("port %d does not exist", id)
	}
	if slices.Equal(t.referrals[id], refs) {
		t.mu.Unlock()
		return nil
	}
	if len(refs) == 0 {
		delete(t.referrals, id)
	} else {
		t.referrals[id] = slices.Clone(refs)
	}
	t.mu.Unlock()
	t.genctr.Add(1)
	for _, c := range t.discovery.Controllers() {
		if c.Port != nil && c.Port.ID == id {
			c.raiseEvent(nvme.AsyncTypeNotice, nvme.AsyncNoticeDiscoveryLog, nvme.LogDiscovery)
		}
	}
	return nil
}

// Referrals returns port id's referrals.
func (t *Target) Referrals(id uint16) []Referral {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.referrals[id])
}

// discoveryLog builds the discovery log page for the queue's host: one
// entry for the discovery subsystem itself, one per subsystem on the
// queue's port that the host may connect to, then the port's referrals,
// in the Linux target's order.
func (q *Queue) discoveryLog(page []byte) []byte {
	// The generation first: a change while the page is built then shows
	// as a new generation on the host's next read, and it reads again.
	genctr := q.target.genctr.Load()
	host := q.ctrl.HostNQN
	var subs []*Subsystem
	for _, s := range q.target.Subsystems() {
		if s.OnPort(q.port.ID) && s.HostAllowed(host) {
			subs = append(subs, s)
		}
	}
	refs := q.target.Referrals(q.port.ID)
	n := 1 + len(subs) + len(refs)
	page = grow(page, nvme.DiscoveryHdrSize+n*nvme.DiscoveryEntSize)
	nvme.PutDiscoveryHeader(page, genctr, uint64(n))
	e := nvme.DiscoveryEntry{
		TransportType: transportType(q.port.Transport),
		// No secure channel to speak of on either transport, and SQ
		// flow control disable supported (Connect CATTR), as the Linux
		// target says of its ports: nvme connect-all then disables it.
		// Not "not required" on TCP: libnvme releases of 2023 took
		// either secure channel bit as a request for TLS.
		TREQ:       secureChannelTREQ(q.port) | nvme.TREQDisableSQFlow,
		TCPSecType: tcpSecType(q.port),
		AddrFamily: addrFamily(q.port.Address),
		PortID:     q.port.ID,
		CNTLID:     nvme.ControllerIDDynamic,
		ASQSZ:      adminQueueSize,
		TRSVCID:    strconv.Itoa(int(q.port.ServiceID)),
		TRADDR:     q.port.Address.String(),
	}
	off := nvme.DiscoveryHdrSize
	e.Subtype, e.SubNQN = nvme.SubtypeCurrentDiscovery, nvme.DiscoveryNQN
	e.Encode(page[off:])
	for _, s := range subs {
		off += nvme.DiscoveryEntSize
		e.Subtype, e.SubNQN = nvme.SubtypeNVM, s.NQN
		e.Encode(page[off:])
	}
	for _, r := range refs {
		off += nvme.DiscoveryEntSize
		// The referred port's ID is the other daemon's to know: 0, as a
		// Linux target referral whose portid was never set.
		ref := nvme.DiscoveryEntry{
			TransportType: transportType(r.Transport),
			// What the referred daemon supports is its own to say.
			TREQ:       nvme.TREQNotSpecified,
			AddrFamily: addrFamily(r.Address),
			Subtype:    nvme.SubtypeDiscoveryReferral,
			CNTLID:     nvme.ControllerIDDynamic,
			ASQSZ:      adminQueueSize,
			TRSVCID:    strconv.Itoa(int(r.ServiceID)),
			SubNQN:     nvme.DiscoveryNQN,
			TRADDR:     r.Address.String(),
		}
		ref.Encode(page[off:])
	}
	return page
}

// transportType is a port's TRTYPE: RDMA unless the port says otherwise.
func transportType(t uint8) uint8 {
	if t == 0 {
		return nvme.TransportRDMA
	}
	return t
}

// addrFamily is the discovery log's ADRFAM of a.
func addrFamily(a netip.Addr) uint8 {
	if a.Is6() && !a.Is4In6() {
		return nvme.AddrFamilyIPv6
	}
	return nvme.AddrFamilyIPv4
}

// secureChannelTREQ is the port's TREQ secure channel bits: a TLS port
// says whether TLS is required; a port without TLS says nothing (see
// discoveryLog).
func secureChannelTREQ(p *Port) uint8 {
	switch p.TLS {
	case TLSRequired:
		return nvme.TREQRequired
	case TLSAllowed:
		return nvme.TREQNotRequired
	}
	return nvme.TREQNotSpecified
}

// tcpSecType is the port's TSAS security type: TLS 1.3 where it serves it.
func tcpSecType(p *Port) uint8 {
	if p.TLS == TLSNone {
		return nvme.TCPSecTypeNone
	}
	return nvme.TCPSecTypeTLS13
}
