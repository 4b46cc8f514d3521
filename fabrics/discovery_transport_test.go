package fabrics

import (
	"net/netip"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A TCP port's discovery log says so in every record: TRTYPE tcp, secure
// channel not specified with SQ flow control disable supported, security
// type none; a referral says which
// transport it is on, and a port of either transport lists it as given.
func TestDiscoveryLogTransport(t *testing.T) {
	tg := NewTarget(nil)
	p := &Port{ID: 1, Transport: nvme.TransportTCP, Address: netip.MustParseAddr("10.0.0.1"), ServiceID: 8009, InlineDataSize: 8192, MaxQueueSize: 128}
	if err := tg.AddPort(p); err != nil {
		t.Fatal(err)
	}
	s := NewSubsystem(testNQN, "", "", true)
	if err := tg.AddSubsystem(s); err != nil {
		t.Fatal(err)
	}
	refs := []Referral{
		{Transport: nvme.TransportRDMA, Address: netip.MustParseAddr("10.0.0.2"), ServiceID: 4420},
		{Transport: nvme.TransportTCP, Address: netip.MustParseAddr("10.0.0.3"), ServiceID: 8009},
	}
	if err := tg.SetReferrals(p.ID, refs); err != nil {
		t.Fatal(err)
	}
	d := connect(t, tg, p, nvme.DiscoveryNQN)
	_, ents, raw := discoveryPage(t, d)
	if len(ents) != 4 {
		t.Fatalf("%d records, want discovery, subsystem, 2 referrals", len(ents))
	}
	for i, e := range ents[:2] {
		if e.TransportType != nvme.TransportTCP || e.TREQ != nvme.TREQDisableSQFlow || raw[i][768] != nvme.TCPSecTypeNone {
			t.Errorf("record %d: trtype %d treq %d sectype %d, want tcp (3), not specified with SQ flow control disable (4), none (0)", i, e.TransportType, e.TREQ, raw[i][768])
		}
	}
	if e := ents[2]; e.TransportType != nvme.TransportRDMA || e.TREQ != nvme.TREQNotSpecified || raw[2][768] != nvme.RDMAQPTypeConnected {
		t.Errorf("RDMA referral: trtype %d treq %d TSAS %d", e.TransportType, e.TREQ, raw[2][768])
	}
	if e := ents[3]; e.TransportType != nvme.TransportTCP || e.TREQ != nvme.TREQNotSpecified || e.TRSVCID != "8009" || e.TRADDR != "10.0.0.3" {
		t.Errorf("TCP referral: %+v", e)
	}
}

// A TCP port with TLS says so in its records: security type TLS 1.3, and
// the secure channel required or not required as configured.
func TestDiscoveryLogTLS(t *testing.T) {
	for _, c := range []struct {
		tls  SecureChannel
		treq uint8
	}{
		{TLSAllowed, nvme.TREQNotRequired},
		{TLSRequired, nvme.TREQRequired},
	} {
		tg := NewTarget(nil)
		p := &Port{ID: 1, Transport: nvme.TransportTCP, Address: netip.MustParseAddr("10.0.0.1"), ServiceID: 4420, InlineDataSize: 8192, MaxQueueSize: 128, TLS: c.tls}
		if err := tg.AddPort(p); err != nil {
			t.Fatal(err)
		}
		if err := tg.AddSubsystem(NewSubsystem(testNQN, "", "", true)); err != nil {
			t.Fatal(err)
		}
		_, ents, raw := discoveryPage(t, connect(t, tg, p, nvme.DiscoveryNQN))
		for i, e := range ents {
			if e.TREQ != c.treq|nvme.TREQDisableSQFlow || raw[i][768] != nvme.TCPSecTypeTLS13 {
				t.Errorf("TLS %d, record %d: treq %d sectype %d, want %d and TLS 1.3 (2)", c.tls, i, e.TREQ, raw[i][768], c.treq|nvme.TREQDisableSQFlow)
			}
		}
	}
}
