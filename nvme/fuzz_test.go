package nvme

import (
	"slices"
	"testing"
)

func FuzzParseConnectData(f *testing.F) {
	b := make([]byte, ConnectDataSize)
	ConnectData{CNTLID: 0xffff, SubNQN: "nqn.a", HostNQN: "nqn.b"}.Encode(b)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseConnectData(data)
		if err != nil {
			return
		}
		if len(d.SubNQN) == 0 || len(d.HostNQN) == 0 || len(d.SubNQN) > 256 || len(d.HostNQN) > 256 {
			t.Fatalf("accepted NQNs of length %d and %d", len(d.SubNQN), len(d.HostNQN))
		}
	})
}

func FuzzParseCMRequest(f *testing.F) {
	b := make([]byte, 56)
	CMRequest{QID: 1, HRQSize: 128, HSQSize: 127}.Encode(b)
	f.Add(b, uint16(128))
	f.Add([]byte{1, 2, 3}, uint16(32))
	f.Fuzz(func(t *testing.T, data []byte, max uint16) {
		r, err := ParseCMRequest(data, max)
		if err != nil {
			return
		}
		if r.RecvDepth() > int(max) || r.HRQSize == 0 || r.HRQSize > max || r.RecFmt != 0 {
			t.Fatalf("accepted %+v with max %d", r, max)
		}
	})
}

// FuzzCommand reads every field of arbitrary submission entries and SGL
// descriptors: views must never read outside the 64 bytes.
func FuzzCommand(f *testing.F) {
	c := make(Command, CommandSize)
	c.SetOpcode(IOWrite)
	c.SGL().SetKeyed(1, 2, 3, true)
	f.Add([]byte(c))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < CommandSize {
			return
		}
		c := Command(data[:CommandSize])
		_ = c.Opcode() + c.Flags() + c.Fuse() + c.FabricsType() + c.CNS() + c.LogID() + c.LogSpecific() +
			c.FeatureID() + c.FeatureSelect() + c.IdentifyCSI() + c.ConnectCAttr()
		_ = uint64(c.CID()) + uint64(c.NSID()) + c.SLBA() + uint64(c.NLB()) + c.LogLength() + c.LogOffset() +
			uint64(c.ConnectQID()) + uint64(c.ConnectSQSize()) + uint64(c.ConnectKATO()) + uint64(c.ConnectRecFmt()) +
			uint64(c.PropertyOffset()) + c.PropertyValue() + uint64(c.IdentifyCNTID())
		_, _, _ = c.LogRAE(), c.FeatureSave(), c.PropertySize8()
		_, _, _ = c.FUA(), c.DEAC(), c.DSMDeallocate()
		if n := c.DSMRanges(); n == 0 || n > DSMMaxRanges {
			t.Fatalf("%d DSM ranges", n)
		}
		_ = c.FeatureValue()
		for n := 10; n <= 15; n++ {
			_ = c.CDW(n)
		}
		s := c.SGL()
		_ = uint64(s.ID()+s.Type()+s.Subtype()) + s.Address() + uint64(s.Length()) + uint64(s.KeyedLength()) + uint64(s.Key())
		if c.LogLength() == 0 || c.LogLength()%4 != 0 {
			t.Fatalf("log length %d", c.LogLength())
		}
	})
}

func FuzzCompletion(f *testing.F) {
	f.Add(uint64(1), uint16(2), uint16(3), uint16(4), uint16(0x4281))
	f.Fuzz(func(t *testing.T, result uint64, sqhd, sqid, cid, st uint16) {
		c := make(Completion, CompletionSize)
		status := Status(st & 0x7fff)
		c.Set(result, sqhd, sqid, cid, status)
		if c.Result() != result || c.SQHD() != sqhd || c.SQID() != sqid || c.CID() != cid || c.Status() != status {
			t.Fatalf("round trip mismatch")
		}
	})
}

// FuzzDSMRanges decodes arbitrary Dataset Management data range by range,
// as the target does with what a host sent.
func FuzzDSMRanges(f *testing.F) {
	b := make([]byte, 2*DSMRangeSize)
	DSMRange(b).Set(8, 16)
	DSMRange(b[DSMRangeSize:]).Set(1<<40, 1)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		out := make(DSMRange, DSMRangeSize) // the fuzzer's input is read-only
		for i := 0; i+DSMRangeSize <= len(data); i += DSMRangeSize {
			r := DSMRange(data[i : i+DSMRangeSize])
			slba, nlb := r.SLBA(), r.NLB()
			out.Set(slba, nlb)
			if out.SLBA() != slba || out.NLB() != nlb {
				t.Fatalf("range %d does not round-trip", i/DSMRangeSize)
			}
		}
	})
}

// FuzzANALog decodes arbitrary ANA log pages, as a host reads one: what
// decodes encodes to a page that decodes to the same fields.
func FuzzANALog(f *testing.F) {
	l := ANALog{ChangeCount: 3, Groups: []ANAGroup{
		{ID: 1, ChangeCount: 3, State: ANAOptimized, NSIDs: []uint32{1, 2}},
		{ID: 2, ChangeCount: 3, State: ANAInaccessible},
	}}
	f.Add(l.Append(nil))
	f.Add([]byte{})
	f.Add(make([]byte, ANALogHdrSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseANALog(data)
		if err != nil {
			return
		}
		n := l.Size()
		if n > len(data) {
			t.Fatalf("decoded %d bytes from %d", n, len(data))
		}
		b := l.Append(nil)
		// The reserved bytes are not kept: compare the fields.
		again, err := ParseANALog(b)
		if err != nil || again.ChangeCount != l.ChangeCount || len(again.Groups) != len(l.Groups) {
			t.Fatalf("re-encoded page does not decode alike: %v", err)
		}
		for i, g := range l.Groups {
			h := again.Groups[i]
			if g.ID != h.ID || g.State != h.State || g.ChangeCount != h.ChangeCount || !slices.Equal(g.NSIDs, h.NSIDs) {
				t.Fatalf("group %d: %+v became %+v", i, g, h)
			}
		}
	})
}

// FuzzParseDiscoveryEntry decodes arbitrary records: never a read past
// the record, and what is decoded encodes back to the same record.
func FuzzParseDiscoveryEntry(f *testing.F) {
	b := make([]byte, DiscoveryEntSize)
	(&DiscoveryEntry{TransportType: TransportRDMA, AddrFamily: AddrFamilyIPv4, Subtype: SubtypeDiscoveryReferral,
		CNTLID: 0xffff, ASQSZ: 32, TRSVCID: "4420", SubNQN: DiscoveryNQN, TRADDR: "10.99.0.2"}).Encode(b)
	f.Add(b)
	f.Add(b[:100])
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := ParseDiscoveryHeader(data); (err != nil) != (len(data) < 18) {
			t.Fatalf("header of %d bytes: %v", len(data), err)
		}
		e, err := ParseDiscoveryEntry(data)
		if err != nil {
			if len(data) >= DiscoveryEntSize {
				t.Fatalf("refused a whole record: %v", err)
			}
			return
		}
		if len(e.TRSVCID) >= discTRSvcIDLen || len(e.TRADDR) >= discTRAddrLen || len(e.SubNQN) > NQNMaxLen {
			return // longer than Encode writes
		}
		out := make([]byte, DiscoveryEntSize)
		e.Encode(out)
		if again, err := ParseDiscoveryEntry(out); err != nil || again != e {
			t.Fatalf("round trip: %+v became %+v (%v)", e, again, err)
		}
	})
}
