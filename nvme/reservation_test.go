package nvme

import (
	"encoding/binary"
	"testing"
)

func TestResvCommandFields(t *testing.T) {
	c := make(Command, CommandSize)
	c.SetResv(ResvReplace, true, ResvExclusiveAccessAllRegs, CPTPLSet)
	if c.ResvAction() != ResvReplace || !c.ResvIEKEY() || c.ResvType() != ResvExclusiveAccessAllRegs || c.ResvCPTPL() != CPTPLSet {
		t.Fatalf("CDW10 %#x decodes as action %d iekey %t type %d cptpl %d", c.CDW(10),
			c.ResvAction(), c.ResvIEKEY(), c.ResvType(), c.ResvCPTPL())
	}
	if c.CDW(10) != 2|1<<3|6<<8|3<<30 {
		t.Fatalf("CDW10 %#x", c.CDW(10))
	}
	c.SetCDW(10, 5)
	c.SetCDW(11, 1)
	if c.ResvReportLength() != 24 || !c.ResvReportEDS() {
		t.Fatalf("report length %d eds %t", c.ResvReportLength(), c.ResvReportEDS())
	}
}

// TestResvStatusLayout checks the offsets of both forms against the
// specification's byte positions.
func TestResvStatusLayout(t *testing.T) {
	s := ResvStatus{Gen: 7, Type: ResvWriteExclusive, PTPL: true, Registrants: []ResvRegistrant{
		{CNTLID: 0xffff, Holds: true, HostID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Key: 0xaabb},
		{CNTLID: 0xffff, HostID: [16]byte{0x20}, Key: 0xccdd},
	}}
	b := make([]byte, ResvStatusExtHdrSize+2*ResvExtEntrySize)
	s.Encode(b, true)
	le := binary.LittleEndian
	if le.Uint32(b) != 7 || b[4] != 1 || le.Uint16(b[5:]) != 2 || b[9] != 1 {
		t.Fatalf("extended header % x", b[:16])
	}
	e := b[64:]
	if le.Uint16(e) != 0xffff || e[2] != 1 || le.Uint64(e[8:]) != 0xaabb || e[16] != 1 || e[31] != 16 {
		t.Fatalf("extended entry % x", e[:32])
	}
	if b[128+2] != 0 || le.Uint64(b[128+8:]) != 0xccdd {
		t.Fatalf("second extended entry % x", b[128:160])
	}
	b = make([]byte, ResvStatusHdrSize+ResvEntrySize)
	s.Encode(b, false)
	e = b[24:]
	if le.Uint16(b[5:]) != 2 || e[2] != 1 || e[8] != 1 || e[15] != 8 || le.Uint64(e[16:]) != 0xaabb {
		t.Fatalf("entry % x", e)
	}
}

// FuzzResvStatus encodes arbitrary registrants into buffers of arbitrary
// size (NUMD smaller than the data, sizes not a multiple of an entry) and
// decodes them back: no entry is cut, REGCTL counts every one.
func FuzzResvStatus(f *testing.F) {
	f.Add(uint32(1), uint8(1), true, uint8(3), uint16(200), true)
	f.Add(uint32(0), uint8(0), false, uint8(0), uint16(0), false)
	f.Add(uint32(9), uint8(6), false, uint8(9), uint16(47), true)
	f.Fuzz(func(t *testing.T, gen uint32, rtype uint8, ptpl bool, nregs uint8, size uint16, ext bool) {
		s := ResvStatus{Gen: gen, Type: rtype, PTPL: ptpl}
		for i := range int(nregs) {
			s.Registrants = append(s.Registrants, ResvRegistrant{CNTLID: ResvDynamicCNTLID, Holds: i == 0,
				HostID: [16]byte{byte(i), 1, 2, 3, 4, 5, 6, 7, 8}, Key: uint64(i) * 0x0101})
		}
		b := make([]byte, size)
		for i := range b {
			b[i] = 0xee // Encode zeroes what it does not fill
		}
		s.Encode(b, ext)
		got, regctl, err := ParseResvStatus(b, ext)
		hdr, ent := ResvStatusHdrSize, ResvEntrySize
		if ext {
			hdr, ent = ResvStatusExtHdrSize, ResvExtEntrySize
		}
		if len(b) < hdr {
			if err == nil {
				t.Fatal("a buffer shorter than the header decoded")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		whole := min(int(nregs), (len(b)-hdr)/ent)
		if regctl != int(nregs) || got.Gen != gen || got.Type != rtype || got.PTPL != ptpl || len(got.Registrants) != whole {
			t.Fatalf("decoded regctl %d %+v from %d registrants in %d bytes", regctl, got, nregs, size)
		}
		for i, r := range got.Registrants {
			w := s.Registrants[i]
			if !ext {
				w.HostID = [16]byte{}
				copy(w.HostID[:8], s.Registrants[i].HostID[:8])
			}
			if r != w {
				t.Fatalf("entry %d: %+v, want %+v", i, r, w)
			}
		}
		if used := hdr + whole*ent; used < len(b) && int(nregs) == whole {
			for _, v := range b[used:] {
				if v != 0 {
					t.Fatalf("byte after the data not zeroed: % x", b[used:])
				}
			}
		}
	})
}

// FuzzResvKeys decodes arbitrary Register/Acquire/Release data.
func FuzzResvKeys(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseResvKeys(b)
		if len(b) < ResvReleaseSize {
			if err == nil {
				t.Fatal("short data decoded")
			}
			return
		}
		if err != nil || k.Current != binary.LittleEndian.Uint64(b) {
			t.Fatalf("%+v %v", k, err)
		}
		if len(b) >= ResvRegisterSize && k.Other != binary.LittleEndian.Uint64(b[8:]) {
			t.Fatalf("other key %#x", k.Other)
		}
		out := make([]byte, min(len(b), ResvRegisterSize))
		k.Encode(out)
		if string(out) != string(b[:len(out)]) {
			t.Fatalf("round trip % x -> % x", b, out)
		}
	})
}

// FuzzResvNotice decodes arbitrary log pages and encodes them back.
func FuzzResvNotice(f *testing.F) {
	b := make([]byte, ResvLogSize)
	ResvNotice{Count: 3, Type: ResvNoticeReleased, Available: 2, NSID: 1}.Encode(b)
	f.Add(b)
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseResvNotice(b)
		if len(b) < ResvLogSize {
			if err == nil {
				t.Fatal("short page decoded")
			}
			return
		}
		out := make([]byte, ResvLogSize)
		n.Encode(out)
		back, _ := ParseResvNotice(out)
		if back != n {
			t.Fatalf("%+v -> %+v", n, back)
		}
	})
}
