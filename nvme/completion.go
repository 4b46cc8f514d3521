package nvme

import "encoding/binary"

// CompletionSize is the size of a completion queue entry.
const CompletionSize = 16

// CapsuleUnit is the unit of Identify IOCCSZ and IORCSZ, the command and
// response capsule sizes.
const CapsuleUnit = 16

// Offsets within a completion queue entry.
const (
	cqeResult = 0 // DW0-DW1
	cqeSQHD   = 8
	cqeSQID   = 10
	cqeCID    = 12
	cqeStatus = 14 // bit 0 is the phase tag, which fabrics does not use
)

// Completion is a view over a 16-byte completion queue entry.
type Completion []byte

// Set fills the whole entry. result is DW0 (low) and DW1 (high).
func (c Completion) Set(result uint64, sqhd, sqid, cid uint16, st Status) {
	binary.LittleEndian.PutUint64(c[cqeResult:], result)
	binary.LittleEndian.PutUint16(c[cqeSQHD:], sqhd)
	binary.LittleEndian.PutUint16(c[cqeSQID:], sqid)
	binary.LittleEndian.PutUint16(c[cqeCID:], cid)
	binary.LittleEndian.PutUint16(c[cqeStatus:], uint16(st)<<1)
}

// Result is DW0-DW1.
func (c Completion) Result() uint64 { return binary.LittleEndian.Uint64(c[cqeResult:]) }

// SQHD is the submission queue head pointer.
func (c Completion) SQHD() uint16 { return binary.LittleEndian.Uint16(c[cqeSQHD:]) }

// SQID is the submission queue identifier.
func (c Completion) SQID() uint16 { return binary.LittleEndian.Uint16(c[cqeSQID:]) }

// CID is the command identifier.
func (c Completion) CID() uint16 { return binary.LittleEndian.Uint16(c[cqeCID:]) }

// Status is the status field without the phase tag.
func (c Completion) Status() Status { return Status(binary.LittleEndian.Uint16(c[cqeStatus:]) >> 1) }
