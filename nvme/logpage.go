package nvme

import "encoding/binary"

// Log page sizes.
const (
	SMARTLogSize      = 512
	ErrorLogEntrySize = 64
	EffectsLogSize    = 4096
	FirmwareLogSize   = 512
	ChangedNSLogSize  = 4096 // ChangedNSMax entries
	DiscoveryHdrSize  = 1024
	DiscoveryEntSize  = 1024
)

// SMARTLog holds the SMART / Health Information fields the target reports.
// Data units are thousands of 512-byte units, rounded up.
type SMARTLog struct {
	CriticalWarning  uint8
	TemperatureK     uint16
	AvailableSpare   uint8
	SpareThreshold   uint8
	PercentUsed      uint8
	DataUnitsRead    uint64
	DataUnitsWritten uint64
	HostReads        uint64
	HostWrites       uint64
	BusyMinutes      uint64
	PowerCycles      uint64
	PowerOnHours     uint64
	UnsafeShutdowns  uint64
	MediaErrors      uint64
	ErrorLogEntries  uint64
}

// Encode writes the page into b (at least SMARTLogSize bytes). The 128-bit
// counters get their low 64 bits.
func (s *SMARTLog) Encode(b []byte) {
	b = b[:SMARTLogSize]
	clear(b)
	le := binary.LittleEndian
	b[0] = s.CriticalWarning
	le.PutUint16(b[1:], s.TemperatureK)
	b[3] = s.AvailableSpare
	b[4] = s.SpareThreshold
	b[5] = s.PercentUsed
	le.PutUint64(b[32:], s.DataUnitsRead)
	le.PutUint64(b[48:], s.DataUnitsWritten)
	le.PutUint64(b[64:], s.HostReads)
	le.PutUint64(b[80:], s.HostWrites)
	le.PutUint64(b[96:], s.BusyMinutes)
	le.PutUint64(b[112:], s.PowerCycles)
	le.PutUint64(b[128:], s.PowerOnHours)
	le.PutUint64(b[144:], s.UnsafeShutdowns)
	le.PutUint64(b[160:], s.MediaErrors)
	le.PutUint64(b[176:], s.ErrorLogEntries)
}

// ErrorLogEntry is one entry of the Error Information log.
type ErrorLogEntry struct {
	Count  uint64
	SQID   uint16
	CID    uint16
	Status Status
	LBA    uint64
	NSID   uint32
}

// Encode writes the entry into b (at least ErrorLogEntrySize bytes).
func (e *ErrorLogEntry) Encode(b []byte) {
	b = b[:ErrorLogEntrySize]
	clear(b)
	le := binary.LittleEndian
	le.PutUint64(b[0:], e.Count)
	le.PutUint16(b[8:], e.SQID)
	le.PutUint16(b[10:], e.CID)
	le.PutUint16(b[12:], uint16(e.Status)<<1)
	le.PutUint16(b[14:], 0xffff) // parameter error location: not specified
	le.PutUint64(b[16:], e.LBA)
	le.PutUint32(b[24:], e.NSID)
	b[29] = TransportRDMA
}

// The Changed Namespace List holds up to ChangedNSMax IDs; past that its
// first entry is ChangedNSOverflow and the rest are zero: the host then
// rescans every namespace.
const (
	ChangedNSMax      = ChangedNSLogSize / 4
	ChangedNSOverflow = 0xffffffff
)

// Commands Supported and Effects bits.
const (
	EffectsSupported = 1 << 0 // CSUPP
	EffectsLBC       = 1 << 1 // logical block content change
	EffectsNCC       = 1 << 2 // namespace capability change
	EffectsNIC       = 1 << 3 // namespace inventory change
	EffectsCCC       = 1 << 4 // controller capability change
)

// PutEffects sets the effects of one admin (io=false) or I/O opcode in an
// effects log page b (EffectsLogSize bytes).
func PutEffects(b []byte, io bool, opcode uint8, effects uint32) {
	off := 4 * int(opcode)
	if io {
		off += 1024
	}
	binary.LittleEndian.PutUint32(b[off:], effects)
}

// Transport types (TRTYPE).
const (
	TransportRDMA = 1
	TransportTCP  = 3
)

// Address families (ADRFAM).
const (
	AddrFamilyIPv4 = 1
	AddrFamilyIPv6 = 2
)

// Discovery log entry subsystem types.
const (
	SubtypeDiscoveryReferral = 1
	SubtypeNVM               = 2
	SubtypeCurrentDiscovery  = 3
)

// RDMA transport specific address subtype values.
const (
	RDMAQPTypeConnected = 1
	RDMAPrTypeNotSpec   = 1
	RDMACMSRDMACM       = 1
)

// PutDiscoveryHeader writes the discovery log page header into b (at least
// DiscoveryHdrSize bytes).
func PutDiscoveryHeader(b []byte, genctr, numrec uint64) {
	b = b[:DiscoveryHdrSize]
	clear(b)
	binary.LittleEndian.PutUint64(b[0:], genctr)
	binary.LittleEndian.PutUint64(b[8:], numrec)
	// recfmt 0
}

// DiscoveryEntry is one record of the discovery log page.
type DiscoveryEntry struct {
	TransportType uint8
	AddrFamily    uint8
	Subtype       uint8
	TREQ          uint8
	PortID        uint16
	CNTLID        uint16
	ASQSZ         uint16
	TRSVCID       string
	SubNQN        string
	TRADDR        string
}

// Encode writes the entry into b (at least DiscoveryEntSize bytes).
func (e *DiscoveryEntry) Encode(b []byte) {
	b = b[:DiscoveryEntSize]
	clear(b)
	le := binary.LittleEndian
	b[0] = e.TransportType
	b[1] = e.AddrFamily
	b[2] = e.Subtype
	b[3] = e.TREQ
	le.PutUint16(b[4:], e.PortID)
	le.PutUint16(b[6:], e.CNTLID)
	le.PutUint16(b[8:], e.ASQSZ)
	putPadded(b[32:64], e.TRSVCID)
	copy(b[256:256+NQNMaxLen], e.SubNQN)
	putPadded(b[512:768], e.TRADDR)
	if e.TransportType == TransportRDMA {
		b[768] = RDMAQPTypeConnected
		b[769] = RDMAPrTypeNotSpec
		b[770] = RDMACMSRDMACM
	}
}

// putPadded writes an ASCII string NUL-padded, as the Linux target does;
// hosts strip both NULs and spaces.
func putPadded(b []byte, s string) {
	copy(b[:len(b)-1], s)
}
