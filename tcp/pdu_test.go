package tcp

import (
	"errors"
	"hash/crc32"
	"testing"
)

// CRC32C test vector (RFC 3720 B.4): 32 bytes of zeros.
func TestDigestCastagnoli(t *testing.T) {
	if got := Digest(make([]byte, 32)); got != 0x8a9136aa {
		t.Fatalf("CRC32C of 32 zero bytes %#x, want 0x8a9136aa", got)
	}
	b := []byte("123456789")
	if got := UpdateDigest(Digest(b[:4]), b[4:]); got != crc32.Checksum(b, castagnoli) || got != 0xe3069283 {
		t.Fatalf("running CRC32C %#x, want 0xe3069283", got)
	}
}

func capsuleHdr(flags, pdo uint8, plen uint32) Header {
	h := make(Header, CommonHeaderSize)
	PutCommon(h, TypeCapsuleCmd, flags, CapsuleCmdHLen, pdo, plen)
	return h
}

func TestCheckCommon(t *testing.T) {
	lim := Limits{MaxInline: 8192, MaxH2CData: 65536}
	dig := Limits{HeaderDigest: true, DataDigest: true, MaxInline: 8192, MaxH2CData: 65536}
	h2c := func(flags, pdo uint8, plen uint32) Header {
		h := make(Header, CommonHeaderSize)
		PutCommon(h, TypeH2CData, flags, DataHdrSize, pdo, plen)
		return h
	}
	icreq := make(Header, CommonHeaderSize)
	PutCommon(icreq, TypeICReq, 0, ICReqSize, 0, ICReqSize)
	for _, c := range []struct {
		name    string
		h       Header
		init    bool
		lim     Limits
		wantFES uint16
		wantFEI uint32
		want    Layout
	}{
		{"icreq", icreq, false, lim, 0, 0, Layout{Header: ICReqSize}},
		{"icreq twice", icreq, true, lim, FESSequence, 0, Layout{}},
		{"capsule before icreq", capsuleHdr(0, 0, 72), false, lim, FESSequence, 0, Layout{}},
		{"capsule", capsuleHdr(0, 0, 72), true, lim, 0, 0, Layout{Header: 72}},
		{"capsule with data", capsuleHdr(0, 72, 72+4096), true, lim, 0, 0, Layout{Header: 72, Data: 4096}},
		{"capsule with digests", capsuleHdr(FlagHDGST|FlagDDGST, 76, 76+512+4), true, dig, 0, 0, Layout{Header: 76, Data: 512, DDigest: 4}},
		{"padding", capsuleHdr(0, 128, 128+512), true, lim, 0, 0, Layout{Header: 72, Pad: 56, Data: 512}},
		{"header digest flag missing", capsuleHdr(0, 0, 76), true, dig, FESInvalidHeader, FieldFlags, Layout{}},
		{"data digest flag missing", capsuleHdr(FlagHDGST, 76, 76+512+4), true, dig, FESInvalidHeader, FieldFlags, Layout{}},
		{"PLEN short", capsuleHdr(0, 0, 40), true, lim, FESInvalidHeader, FieldPLen, Layout{}},
		{"PDO inside the header", capsuleHdr(0, 40, 72+512), true, lim, FESInvalidHeader, FieldPDO, Layout{}},
		{"in-capsule data over the limit", capsuleHdr(0, 72, 72+8192+16), true, lim, FESDataLimitExceeded, 0, Layout{}},
		{"oversized PLEN", capsuleHdr(0, 72, 0xffffffff), true, lim, FESDataLimitExceeded, 0, Layout{}},
		{"h2c", h2c(0, 24, 24+65536), true, lim, 0, 0, Layout{Header: 24, Data: 65536}},
		{"h2c over MAXH2CDATA", h2c(0, 24, 24+65540), true, lim, FESDataLimitExceeded, 0, Layout{}},
		{"h2c without data", h2c(0, 0, 24), true, lim, FESInvalidHeader, FieldPLen, Layout{}},
		{"wrong HLEN", func() Header { h := capsuleHdr(0, 0, 72); h[2] = 24; return h }(), true, lim, FESInvalidHeader, FieldHLen, Layout{}},
		{"controller's PDU type", func() Header { h := capsuleHdr(0, 0, 72); h[0] = TypeC2HData; return h }(), true, lim, FESInvalidHeader, FieldType, Layout{}},
		{"unknown PDU type", func() Header { h := capsuleHdr(0, 0, 72); h[0] = 0x0f; return h }(), true, lim, FESInvalidHeader, FieldType, Layout{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := CheckCommon(c.h, c.init, c.lim)
			if c.wantFES == 0 {
				if err != nil || l != c.want {
					t.Fatalf("layout %+v, error %v; want %+v", l, err, c.want)
				}
				return
			}
			var pe *PDUError
			if !errors.As(err, &pe) || pe.FES != c.wantFES || pe.FEI != c.wantFEI {
				t.Fatalf("error %v, want FES %#x FEI %d", err, c.wantFES, c.wantFEI)
			}
		})
	}
}

func TestCheckICReq(t *testing.T) {
	b := make([]byte, ICReqSize)
	PutICReq(b, 0, 0, DigestHeader|DigestData, 0)
	if err := CheckICReq(b); err != nil {
		t.Fatal(err)
	}
	PutICReq(b, 1, 0, 0, 0)
	var pe *PDUError
	if err := CheckICReq(b); !errors.As(err, &pe) || pe.FES != FESUnsupportedParam || pe.FEI != FieldPFV {
		t.Fatalf("PFV 1: %v", err)
	}
	PutICReq(b, 0, MaxHPDA+1, 0, 0)
	if err := CheckICReq(b); !errors.As(err, &pe) || pe.FES != FESInvalidHeader || pe.FEI != FieldHPDA {
		t.Fatalf("HPDA 32: %v", err)
	}
}

// The decoder of common headers never panics and the layout it accepts
// always adds up to PLEN within the limits.
func FuzzCheckCommon(f *testing.F) {
	f.Add([]byte{TypeCapsuleCmd, 0, 72, 72, 0x48, 0x12, 0, 0}, true, true, true)
	f.Add([]byte{TypeICReq, 0, 128, 0, 128, 0, 0, 0}, false, false, false)
	f.Add([]byte{TypeH2CData, 3, 24, 28, 0xff, 0xff, 0xff, 0xff}, true, true, true)
	f.Add([]byte{TypeH2CTermReq, 0, 24, 0, 40, 0, 0, 0}, true, false, false)
	f.Fuzz(func(t *testing.T, b []byte, init, hd, dd bool) {
		if len(b) < CommonHeaderSize {
			return
		}
		lim := Limits{HeaderDigest: hd, DataDigest: dd, MaxInline: 8192, MaxH2CData: 131072}
		h := Header(b)
		l, err := CheckCommon(h, init, lim)
		if err != nil {
			var pe *PDUError
			if !errors.As(err, &pe) || pe.FES == 0 {
				t.Fatalf("error without a fatal error status: %v", err)
			}
			return
		}
		if l.Header < int(h.HLen()) || l.Pad < 0 || l.Data < 0 || l.Header+l.Pad+l.Data+l.DDigest != int(h.PLen()) {
			t.Fatalf("layout %+v does not add up to PLEN %d", l, h.PLen())
		}
		if l.Data > 131072 || l.Pad > 255 {
			t.Fatalf("layout %+v beyond the limits", l)
		}
	})
}
