package nvme

import "encoding/binary"

// CompletionSize is the size of a completion queue entry.
const CompletionSize = 16

// Completion is a view over a 16-byte completion queue entry.
type Completion []byte

// Set fills the whole entry. result is DW0 (low) and DW1 (high).
func (c Completion) Set(result uint64, sqhd, sqid, cid uint16, st Status) {
	binary.LittleEndian.PutUint64(c[0:], result)
	binary.LittleEndian.PutUint16(c[8:], sqhd)
	binary.LittleEndian.PutUint16(c[10:], sqid)
	binary.LittleEndian.PutUint16(c[12:], cid)
	binary.LittleEndian.PutUint16(c[14:], uint16(st)<<1)
}

// Result is DW0-DW1.
func (c Completion) Result() uint64 { return binary.LittleEndian.Uint64(c[0:]) }

// SQHD is the submission queue head pointer.
func (c Completion) SQHD() uint16 { return binary.LittleEndian.Uint16(c[8:]) }

// SQID is the submission queue identifier.
func (c Completion) SQID() uint16 { return binary.LittleEndian.Uint16(c[10:]) }

// CID is the command identifier.
func (c Completion) CID() uint16 { return binary.LittleEndian.Uint16(c[12:]) }

// Status is the status field without the phase tag.
func (c Completion) Status() Status { return Status(binary.LittleEndian.Uint16(c[14:]) >> 1) }
