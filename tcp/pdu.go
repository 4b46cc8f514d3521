package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// PDU wire formats of the NVMe/TCP transport binding (NVMe/TCP Transport
// Specification 1.0): every PDU starts with an 8-byte common header; the
// PDU-specific header follows, then an optional header digest, padding up
// to the data offset (PDO), the data and an optional data digest. A PDU is
// a byte-slice view read in place, as the nvme package's structures.

// PDU types.
const (
	TypeICReq      = 0x00
	TypeICResp     = 0x01
	TypeH2CTermReq = 0x02
	TypeC2HTermReq = 0x03
	TypeCapsuleCmd = 0x04
	TypeCapsuleRsp = 0x05
	TypeH2CData    = 0x06
	TypeC2HData    = 0x07
	TypeR2T        = 0x09
)

// Common header flags.
const (
	FlagHDGST       = 1 << 0 // a header digest follows the header
	FlagDDGST       = 1 << 1 // a data digest follows the data
	FlagDataLast    = 1 << 2 // the last data PDU of a transfer (or of an R2T)
	FlagDataSuccess = 1 << 3 // C2HData: the command succeeded, no CapsuleResp follows
)

// Common header offsets.
const (
	hdrType  = 0
	hdrFlags = 1
	hdrHLen  = 2
	hdrPDO   = 3
	hdrPLen  = 4
	// CommonHeaderSize is the size of the common header.
	CommonHeaderSize = 8
)

// Header lengths (HLEN) of each PDU type.
const (
	ICReqSize      = 128
	ICRespSize     = 128
	TermReqHdrSize = 24
	CapsuleCmdHLen = CommonHeaderSize + 64
	CapsuleRspHLen = CommonHeaderSize + 16
	DataHdrSize    = 24 // H2CData, C2HData
	R2TSize        = 24
	// DigestSize is the size of a header or data digest (CRC32C).
	DigestSize = 4
	// MaxTermReqData is how much of the offending PDU a TermReq carries:
	// the Linux host refuses a C2HTermReq longer than 152 bytes.
	MaxTermReqData = 152 - TermReqHdrSize
)

// ICReq / ICResp offsets.
const (
	icPFV     = 8  // PDU format version, 0 for NVMe/TCP 1.0
	icPDA     = 10 // ICReq: HPDA, the host's data alignment; ICResp: CPDA
	icDigest  = 11 // bit 0 header digest, bit 1 data digest
	icMaxData = 12 // ICReq: MAXR2T (0's based); ICResp: MAXH2CDATA
)

// ICReq field offsets, for the FEI of a C2HTermReq.
const (
	FieldPFV  = icPFV
	FieldHPDA = icPDA
)

// Digest bits of ICReq and ICResp.
const (
	DigestHeader = 1 << 0
	DigestData   = 1 << 1
)

// MaxHPDA is the largest host PDU data alignment: (HPDA+1) dwords, 128 bytes.
const MaxHPDA = 31

// Data and R2T PDU offsets.
const (
	dataCID    = 8
	dataTTag   = 10
	dataOffset = 12
	dataLength = 16
)

// Field offsets of data PDUs, for the FEI of a C2HTermReq.
const (
	FieldFlags = hdrFlags
	FieldHLen  = hdrHLen
	FieldPDO   = hdrPDO
	FieldPLen  = hdrPLen
	FieldType  = hdrType
	FieldTTag  = dataTTag
)

// TermReq offsets.
const (
	termFES = 8
	termFEI = 10
)

// Fatal error status (FES) of a TermReq.
const (
	FESInvalidHeader     = 0x01 // FEI: the byte offset of the field in error
	FESSequence          = 0x02 // a PDU that the state of the connection does not allow
	FESHeaderDigest      = 0x03
	FESDataOutOfRange    = 0x04 // data offset and length outside the command's transfer
	FESDataLimitExceeded = 0x05 // more data than MAXH2CDATA or the in-capsule size
	FESUnsupportedParam  = 0x06 // FEI: the byte offset of the ICReq field
)

// SGL descriptor identifiers the Linux host uses on TCP: data not in the
// capsule is a transport SGL data block (type 5, transport-specific subtype
// 0xA) that R2T and C2HData move; in-capsule data is an offset data block.
const (
	SGLTransportData = 0x5a
)

// PFV is the PDU format version this transport speaks.
const PFV = 0

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Digest is the CRC32C of b, as header and data digests carry it.
func Digest(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// UpdateDigest extends a running digest with b.
func UpdateDigest(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// Header is the common header and PDU-specific header of a received PDU.
type Header []byte

func (h Header) Type() uint8    { return h[hdrType] }
func (h Header) Flags() uint8   { return h[hdrFlags] }
func (h Header) HLen() uint8    { return h[hdrHLen] }
func (h Header) PDO() uint8     { return h[hdrPDO] }
func (h Header) PLen() uint32   { return binary.LittleEndian.Uint32(h[hdrPLen:]) }
func (h Header) CID() uint16    { return binary.LittleEndian.Uint16(h[dataCID:]) }
func (h Header) TTag() uint16   { return binary.LittleEndian.Uint16(h[dataTTag:]) }
func (h Header) Offset() uint32 { return binary.LittleEndian.Uint32(h[dataOffset:]) }
func (h Header) Length() uint32 { return binary.LittleEndian.Uint32(h[dataLength:]) }

// ICReq fields.
func (h Header) PFV() uint16       { return binary.LittleEndian.Uint16(h[icPFV:]) }
func (h Header) HPDA() uint8       { return h[icPDA] }
func (h Header) DigestBits() uint8 { return h[icDigest] }
func (h Header) MaxR2T() uint32    { return binary.LittleEndian.Uint32(h[icMaxData:]) }

// Capsule is the 64-byte command of a CapsuleCmd.
func (h Header) Capsule() []byte { return h[CommonHeaderSize : CommonHeaderSize+64] }

// Response is the 16-byte completion of a CapsuleResp.
func (h Header) Response() []byte { return h[CommonHeaderSize : CommonHeaderSize+16] }

// FES and FEI of a TermReq.
func (h Header) FES() uint16 { return binary.LittleEndian.Uint16(h[termFES:]) }
func (h Header) FEI() uint32 { return binary.LittleEndian.Uint32(h[termFEI:]) }

// PutCommon writes a common header.
func PutCommon(b []byte, typ, flags, hlen, pdo uint8, plen uint32) {
	b[hdrType], b[hdrFlags], b[hdrHLen], b[hdrPDO] = typ, flags, hlen, pdo
	binary.LittleEndian.PutUint32(b[hdrPLen:], plen)
}

// PutICResp writes an ICResp (ICRespSize bytes).
func PutICResp(b []byte, digests uint8, maxH2CData uint32) {
	b = b[:ICRespSize]
	clear(b)
	PutCommon(b, TypeICResp, 0, ICRespSize, 0, ICRespSize)
	binary.LittleEndian.PutUint16(b[icPFV:], PFV)
	b[icPDA] = 0 // CPDA: no alignment wanted of the host's data
	b[icDigest] = digests
	binary.LittleEndian.PutUint32(b[icMaxData:], maxH2CData)
}

// PutICReq writes an ICReq (ICReqSize bytes), as a host sends it.
func PutICReq(b []byte, pfv uint16, hpda, digests uint8, maxR2T uint32) {
	b = b[:ICReqSize]
	clear(b)
	PutCommon(b, TypeICReq, 0, ICReqSize, 0, ICReqSize)
	binary.LittleEndian.PutUint16(b[icPFV:], pfv)
	b[icPDA] = hpda
	b[icDigest] = digests
	binary.LittleEndian.PutUint32(b[icMaxData:], maxR2T)
}

// PutData writes the header of a data PDU (C2HData, H2CData) or an R2T.
func PutData(b []byte, cid, ttag uint16, offset, length uint32) {
	binary.LittleEndian.PutUint16(b[dataCID:], cid)
	binary.LittleEndian.PutUint16(b[dataTTag:], ttag)
	binary.LittleEndian.PutUint32(b[dataOffset:], offset)
	binary.LittleEndian.PutUint32(b[dataLength:], length)
	clear(b[20:24])
}

// PutTermReq writes a TermReq header; the offending PDU's header follows
// it as data, up to MaxTermReqData bytes.
func PutTermReq(b []byte, typ uint8, fes uint16, fei uint32, dataLen int) {
	b = b[:TermReqHdrSize]
	clear(b)
	PutCommon(b, typ, 0, TermReqHdrSize, 0, uint32(TermReqHdrSize+dataLen))
	binary.LittleEndian.PutUint16(b[termFES:], fes)
	binary.LittleEndian.PutUint32(b[termFEI:], fei)
}

// PutDigest writes a digest, little-endian as the Linux host reads it.
func PutDigest(b []byte, crc uint32) { binary.LittleEndian.PutUint32(b, crc) }

// GetDigest reads a digest.
func GetDigest(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// PDUError is a fatal transport error found in a received PDU: the
// C2HTermReq that answers it carries FES and FEI.
type PDUError struct {
	FES uint16
	FEI uint32 // the byte offset of the field in error (FES 1 and 6)
	Msg string
}

func (e *PDUError) Error() string {
	return fmt.Sprintf("%s (fatal error status %#x, field offset %d)", e.Msg, e.FES, e.FEI)
}

// ErrPDU matches every *PDUError with errors.Is.
var ErrPDU = errors.New("fatal NVMe/TCP PDU error")

func (e *PDUError) Is(target error) bool { return target == ErrPDU }

func pduErr(fes uint16, fei uint32, format string, args ...any) *PDUError {
	return &PDUError{FES: fes, FEI: fei, Msg: fmt.Sprintf(format, args...)}
}

// Limits bound the PDUs a connection accepts.
type Limits struct {
	HeaderDigest bool
	DataDigest   bool
	MaxInline    uint32 // in-capsule data of a CapsuleCmd
	MaxH2CData   uint32 // data of an H2CData PDU
}

// hlenOf is the HLEN each PDU type a host may send must carry; 0 for a
// type a host never sends.
func hlenOf(typ uint8) uint8 {
	switch typ {
	case TypeICReq:
		return ICReqSize
	case TypeH2CTermReq:
		return TermReqHdrSize
	case TypeCapsuleCmd:
		return CapsuleCmdHLen
	case TypeH2CData:
		return DataHdrSize
	}
	return 0
}

// Layout is where the parts of a received PDU lie, from its common header.
type Layout struct {
	Header  int // HLEN plus the header digest
	Pad     int // bytes between the header and the data
	Data    int // data bytes
	DDigest int // 0 or DigestSize
}

// CheckCommon validates the common header of a PDU a host sent, in a
// connection past (initialized) or before its ICReq, and returns the
// layout of the rest. It reads only the first CommonHeaderSize bytes.
func CheckCommon(h Header, initialized bool, lim Limits) (Layout, error) {
	typ := h.Type()
	want := hlenOf(typ)
	if want == 0 {
		return Layout{}, pduErr(FESInvalidHeader, FieldType, "PDU type %#x is not one a host sends", typ)
	}
	if (typ == TypeICReq) == initialized {
		if initialized {
			return Layout{}, pduErr(FESSequence, 0, "ICReq on an initialized connection")
		}
		return Layout{}, pduErr(FESSequence, 0, "PDU type %#x before ICReq", typ)
	}
	if h.HLen() != want {
		return Layout{}, pduErr(FESInvalidHeader, FieldHLen, "HLEN %d for PDU type %#x, want %d", h.HLen(), typ, want)
	}
	plen := h.PLen()
	var l Layout
	l.Header = int(want)
	if typ == TypeICReq || typ == TypeH2CTermReq {
		// No digests, no PDO: ICReq is exactly its header; a TermReq
		// carries at most the offending header as data.
		max := uint32(want)
		if typ == TypeH2CTermReq {
			max += MaxTermReqData
		}
		if plen < uint32(want) || plen > max {
			return Layout{}, pduErr(FESInvalidHeader, FieldPLen, "PLEN %d for PDU type %#x", plen, typ)
		}
		l.Data = int(plen) - int(want)
		return l, nil
	}
	flags := h.Flags()
	if (flags&FlagHDGST != 0) != lim.HeaderDigest {
		return Layout{}, pduErr(FESInvalidHeader, FieldFlags, "header digest flag %v, negotiated %v", flags&FlagHDGST != 0, lim.HeaderDigest)
	}
	if lim.HeaderDigest {
		l.Header += DigestSize
	}
	if plen < uint32(l.Header) {
		return Layout{}, pduErr(FESInvalidHeader, FieldPLen, "PLEN %d shorter than the header", plen)
	}
	if plen == uint32(l.Header) {
		// No data: PDO is reserved (the Linux host sends 0) and no data
		// digest follows.
		if typ == TypeH2CData {
			return Layout{}, pduErr(FESInvalidHeader, FieldPLen, "H2CData PDU without data")
		}
		return l, nil
	}
	if (flags&FlagDDGST != 0) != lim.DataDigest {
		return Layout{}, pduErr(FESInvalidHeader, FieldFlags, "data digest flag %v, negotiated %v", flags&FlagDDGST != 0, lim.DataDigest)
	}
	pdo := uint32(h.PDO())
	if pdo < uint32(l.Header) || pdo > plen {
		return Layout{}, pduErr(FESInvalidHeader, FieldPDO, "PDO %d outside the PDU (header %d, PLEN %d)", pdo, l.Header, plen)
	}
	l.Pad = int(pdo) - l.Header
	if lim.DataDigest {
		l.DDigest = DigestSize
	}
	if plen-pdo < uint32(l.DDigest) {
		return Layout{}, pduErr(FESInvalidHeader, FieldPLen, "PLEN %d leaves no room for the data digest", plen)
	}
	data := plen - pdo - uint32(l.DDigest)
	max := lim.MaxInline
	if typ == TypeH2CData {
		max = lim.MaxH2CData
	}
	if data > max {
		return Layout{}, pduErr(FESDataLimitExceeded, 0, "%d data bytes in PDU type %#x, at most %d allowed", data, typ, max)
	}
	l.Data = int(data)
	return l, nil
}

// CheckHeaderDigest verifies the digest that follows the header.
func CheckHeaderDigest(hdr []byte, hlen int) error {
	if got, want := GetDigest(hdr[hlen:]), Digest(hdr[:hlen]); got != want {
		return pduErr(FESHeaderDigest, 0, "header digest %#x, computed %#x", got, want)
	}
	return nil
}

// CheckICReq validates an initialize connection request.
func CheckICReq(h Header) error {
	if h.PFV() != PFV {
		return pduErr(FESUnsupportedParam, FieldPFV, "PDU format version %d, only %d is supported", h.PFV(), PFV)
	}
	if h.HPDA() > MaxHPDA {
		return pduErr(FESInvalidHeader, FieldHPDA, "HPDA %d, at most %d", h.HPDA(), MaxHPDA)
	}
	return nil
}
