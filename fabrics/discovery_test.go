package fabrics

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// discoveryPage reads the whole discovery log as a host does: the
// header, then every record.
func discoveryPage(t *testing.T, h *host) (nvme.DiscoveryHeader, []nvme.DiscoveryEntry, [][]byte) {
	t.Helper()
	b, st := h.getLog(nvme.LogDiscovery, nvme.DiscoveryHdrSize, 0)
	if st != 0 {
		t.Fatalf("discovery log header: %v", st)
	}
	hdr, err := nvme.ParseDiscoveryHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	n := nvme.DiscoveryHdrSize + int(hdr.NumRec)*nvme.DiscoveryEntSize
	b, st = h.getLog(nvme.LogDiscovery, n, 0)
	if st != 0 {
		t.Fatalf("discovery log: %v", st)
	}
	var ents []nvme.DiscoveryEntry
	var raw [][]byte
	for off := nvme.DiscoveryHdrSize; off < n; off += nvme.DiscoveryEntSize {
		e, err := nvme.ParseDiscoveryEntry(b[off:])
		if err != nil {
			t.Fatal(err)
		}
		ents = append(ents, e)
		raw = append(raw, b[off:off+nvme.DiscoveryEntSize])
	}
	return hdr, ents, raw
}

// pendingEvents reports the AERs c holds and the events waiting for one.
func pendingEvents(c *Controller) (aers, events int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.aers), len(c.events)
}

// A port's referrals follow its subsystems in its discovery log, as
// referral records (subtype 1) naming the discovery subsystem at the
// referred address, with the same RDMA fields as the other records. A
// change moves the generation counter and raises the discovery log change
// event on the discovery controllers of that port only.
func TestDiscoveryReferrals(t *testing.T) {
	tg, p, _ := testTarget(t)
	p2 := &Port{ID: 2, Address: netip.MustParseAddr("10.0.0.2"), ServiceID: 4420, InlineDataSize: 8192, MaxQueueSize: 128}
	if err := tg.AddPort(p2); err != nil {
		t.Fatal(err)
	}
	d := connect(t, tg, p, nvme.DiscoveryNQN)
	d2 := connect(t, tg, p2, nvme.DiscoveryNQN)
	before, _, _ := discoveryPage(t, d)
	aen := enableAEN(t, d, nvme.OAESDiscoveryChange)
	aen2 := enableAEN(t, d2, nvme.OAESDiscoveryChange)

	refs := []Referral{
		{Address: netip.MustParseAddr("10.99.0.2"), ServiceID: 4420},
		{Address: netip.MustParseAddr("fd00::2"), ServiceID: 4421},
	}
	if err := tg.SetReferrals(p.ID, refs); err != nil {
		t.Fatal(err)
	}
	if rsp := <-aen; rsp == nil || rsp.Result() != nvme.AsyncTypeNotice|uint64(nvme.AsyncNoticeDiscoveryLog)<<8|uint64(nvme.LogDiscovery)<<16 {
		t.Fatalf("discovery AER completion %v", rsp)
	}
	// Raised synchronously: by now the other port's controller would have it.
	if aers, events := pendingEvents(d2.ctrl()); aers != 1 || events != 0 {
		t.Fatalf("discovery controller of another port: %d AERs held, %d events queued; want 1 and 0", aers, events)
	}

	hdr, ents, raw := discoveryPage(t, d)
	if hdr.GenCtr == before.GenCtr {
		t.Fatalf("generation counter stayed at %d", hdr.GenCtr)
	}
	expectReferralRecords(t, ents, raw)
	// The other port lists none.
	if _, ents2, _ := discoveryPage(t, d2); len(ents2) != 2 {
		t.Fatalf("port 2 lists %d records, want 2", len(ents2))
	}

	// Setting the same list again changes nothing; removing them does.
	gen := hdr.GenCtr
	if err := tg.SetReferrals(p.ID, refs); err != nil {
		t.Fatal(err)
	}
	if hdr, _, _ := discoveryPage(t, d); hdr.GenCtr != gen {
		t.Fatalf("the same referrals moved the generation counter from %d to %d", gen, hdr.GenCtr)
	}
	if err := tg.SetReferrals(p.ID, nil); err != nil {
		t.Fatal(err)
	}
	if hdr, ents, _ := discoveryPage(t, d); hdr.GenCtr == gen || len(ents) != 2 {
		t.Fatalf("after removing the referrals: generation %d (was %d), %d records", hdr.GenCtr, gen, len(ents))
	}
	if err := tg.SetReferrals(9, refs); err == nil {
		t.Fatal("referrals set on a port that does not exist")
	}
	select {
	case rsp := <-aen2:
		t.Fatalf("discovery controller of another port got an event: %v", rsp)
	default:
	}
}

// expectReferralRecords checks the discovery log page's records, ents as
// decoded and raw as sent: the discovery subsystem's, the subsystem's, then
// the two referrals TestDiscoveryReferrals sets.
func expectReferralRecords(t *testing.T, ents []nvme.DiscoveryEntry, raw [][]byte) {
	t.Helper()
	if len(ents) != 4 || ents[0].Subtype != nvme.SubtypeCurrentDiscovery || ents[1].SubNQN != testNQN {
		t.Fatalf("records %+v, want the discovery subsystem, %s, then 2 referrals", ents, testNQN)
	}
	// The port's own records offer SQ flow control disable; a referral
	// leaves that to the daemon it names.
	for i, e := range ents[:2] {
		if e.TREQ != nvme.TREQDisableSQFlow {
			t.Errorf("record %d: TREQ %#x, want %#x (secure channel not specified, SQ flow control disable supported)", i, e.TREQ, nvme.TREQDisableSQFlow)
		}
	}
	want := []nvme.DiscoveryEntry{
		{TransportType: nvme.TransportRDMA, AddrFamily: nvme.AddrFamilyIPv4, Subtype: nvme.SubtypeDiscoveryReferral,
			CNTLID: 0xffff, ASQSZ: 32, TRSVCID: "4420", SubNQN: nvme.DiscoveryNQN, TRADDR: "10.99.0.2"},
		{TransportType: nvme.TransportRDMA, AddrFamily: nvme.AddrFamilyIPv6, Subtype: nvme.SubtypeDiscoveryReferral,
			CNTLID: 0xffff, ASQSZ: 32, TRSVCID: "4421", SubNQN: nvme.DiscoveryNQN, TRADDR: "fd00::2"},
	}
	for i, w := range want {
		if ents[2+i] != w {
			t.Errorf("referral %d: %+v, want %+v", i, ents[2+i], w)
		}
		// Transport specific address subtype (bytes 768..1023): RDMA's, as
		// for the subsystem's record.
		if !bytes.Equal(raw[2+i][768:], raw[1][768:]) {
			t.Errorf("referral %d: TSAS % x, want % x", i, raw[2+i][768:772], raw[1][768:772])
		}
	}
}
