package nvme

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// Firmware Slot log: AFI (bits 2:0 are the running slot), then from
// FirmwareSlotOff the revision of each slot, FirmwareRevSize bytes each.
const (
	FirmwareAFI     = 0
	FirmwareSlotOff = 8
	FirmwareRevSize = 8
)

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

// SMART / Health Information log offsets (NVMe base specification, "SMART /
// Health Information"). The counters from smartDataUnitsRead on are 128-bit.
const (
	smartCriticalWarning = 0
	smartTemperature     = 1
	smartAvailableSpare  = 3
	smartSpareThreshold  = 4
	smartPercentUsed     = 5
	smartDataUnitsRead   = 32
	smartDataUnitsWrite  = 48
	smartHostReads       = 64
	smartHostWrites      = 80
	smartBusyTime        = 96
	smartPowerCycles     = 112
	smartPowerOnHours    = 128
	smartUnsafeShutdowns = 144
	smartMediaErrors     = 160
	smartErrorEntries    = 176
)

// SMARTDataUnits converts a byte count to the unit of the SMART data units
// read and written counters: thousands of 512-byte units, rounded up.
func SMARTDataUnits(bytes uint64) uint64 { return (bytes/512 + 999) / 1000 }

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
	b[smartCriticalWarning] = s.CriticalWarning
	le.PutUint16(b[smartTemperature:], s.TemperatureK)
	b[smartAvailableSpare] = s.AvailableSpare
	b[smartSpareThreshold] = s.SpareThreshold
	b[smartPercentUsed] = s.PercentUsed
	le.PutUint64(b[smartDataUnitsRead:], s.DataUnitsRead)
	le.PutUint64(b[smartDataUnitsWrite:], s.DataUnitsWritten)
	le.PutUint64(b[smartHostReads:], s.HostReads)
	le.PutUint64(b[smartHostWrites:], s.HostWrites)
	le.PutUint64(b[smartBusyTime:], s.BusyMinutes)
	le.PutUint64(b[smartPowerCycles:], s.PowerCycles)
	le.PutUint64(b[smartPowerOnHours:], s.PowerOnHours)
	le.PutUint64(b[smartUnsafeShutdowns:], s.UnsafeShutdowns)
	le.PutUint64(b[smartMediaErrors:], s.MediaErrors)
	le.PutUint64(b[smartErrorEntries:], s.ErrorLogEntries)
}

// Error Information log entry offsets.
const (
	errCount        = 0
	errSQID         = 8
	errCID          = 10
	errStatus       = 12 // the status field of the completion: bit 0 is the phase tag
	errParamLoc     = 14
	errLBA          = 16
	errNSID         = 24
	errTransport    = 29 // TRTYPE of the transport that saw the error
	errParamLocNone = 0xffff
)

// ErrorLogEntry is one entry of the Error Information log.
type ErrorLogEntry struct {
	Count  uint64
	SQID   uint16
	CID    uint16
	Status Status
	LBA    uint64
	NSID   uint32
	// Transport is the TRTYPE of the transport that saw the error
	// (TransportRDMA when 0).
	Transport uint8
}

// Encode writes the entry into b (at least ErrorLogEntrySize bytes).
func (e *ErrorLogEntry) Encode(b []byte) {
	b = b[:ErrorLogEntrySize]
	clear(b)
	le := binary.LittleEndian
	le.PutUint64(b[errCount:], e.Count)
	le.PutUint16(b[errSQID:], e.SQID)
	le.PutUint16(b[errCID:], e.CID)
	le.PutUint16(b[errStatus:], uint16(e.Status)<<1)
	le.PutUint16(b[errParamLoc:], errParamLocNone)
	le.PutUint64(b[errLBA:], e.LBA)
	le.PutUint32(b[errNSID:], e.NSID)
	b[errTransport] = e.Transport
	if e.Transport == 0 {
		b[errTransport] = TransportRDMA
	}
}

// The Changed Namespace List holds up to ChangedNSMax IDs; past that its
// first entry is ChangedNSOverflow and the rest are zero: the host then
// rescans every namespace.
const (
	ChangedNSEntrySize = 4
	ChangedNSMax       = ChangedNSLogSize / ChangedNSEntrySize
	ChangedNSOverflow  = 0xffffffff
)

// PutChangedNS writes entry i of a Changed Namespace List.
func PutChangedNS(b []byte, i int, nsid uint32) {
	binary.LittleEndian.PutUint32(b[i*ChangedNSEntrySize:], nsid)
}

// Commands Supported and Effects data structure bits (one dword per opcode).
const (
	EffectsSupported = 1 << 0 // CSUPP: the command is supported
	EffectsLBC       = 1 << 1 // LBCC: logical block content change
	EffectsNCC       = 1 << 2 // NCC: namespace capability change
	EffectsNIC       = 1 << 3 // NIC: namespace inventory change
	EffectsCCC       = 1 << 4 // CCC: controller capability change
	// CSE (bits 18:16): how the command must be serialised with others.
	EffectsCSEShift = 16
	EffectsCSEMask  = 0x7 << EffectsCSEShift
	EffectsCSENone  = 0 << EffectsCSEShift // no restriction
	EffectsCSEOneNS = 1 << EffectsCSEShift // no other command to the same namespace
	EffectsCSEAllNS = 2 << EffectsCSEShift // no other command to any namespace
)

// Commands Supported and Effects log layout: 256 admin dwords, then 256
// I/O dwords, then reserved space up to EffectsLogSize.
const (
	EffectsEntrySize = 4
	EffectsAdminOff  = 0
	EffectsIOOff     = EffectsAdminOff + Opcodes*EffectsEntrySize
)

// PutEffects sets the effects of one admin (io=false) or I/O opcode in an
// effects log page b (EffectsLogSize bytes).
func PutEffects(b []byte, io bool, opcode uint8, effects uint32) {
	binary.LittleEndian.PutUint32(b[effectsOffset(io, opcode):], effects)
}

// Effects reads the effects of one admin (io=false) or I/O opcode from an
// effects log page b.
func Effects(b []byte, io bool, opcode uint8) uint32 {
	return binary.LittleEndian.Uint32(b[effectsOffset(io, opcode):])
}

func effectsOffset(io bool, opcode uint8) int {
	off := EffectsAdminOff
	if io {
		off = EffectsIOOff
	}
	return off + EffectsEntrySize*int(opcode)
}

// Transport types (TRTYPE).
const (
	TransportRDMA = 1
	TransportTCP  = 3
)

// Transport requirements (TREQ): whether a secure channel is required
// (bits 1:0), and whether the port supports SQ flow control disable.
const (
	TREQNotSpecified  = 0
	TREQRequired      = 1
	TREQNotRequired   = 2
	TREQDisableSQFlow = 1 << 2
)

// TCP transport specific address subtype: the security type.
const (
	TCPSecTypeNone  = 0
	TCPSecTypeTLS13 = 2 // TLS 1.3, the NVMe/TCP secure channel
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

// Discovery log page header offsets.
const (
	discGenCtr = 0
	discNumRec = 8
	discRecFmt = 16
)

// Discovery log page entry offsets (NVMe-oF "Discovery Log Page Entry").
const (
	discTRType     = 0
	discAdrFam     = 1
	discSubType    = 2
	discTReq       = 3
	discPortID     = 4
	discCNTLID     = 6
	discASQSZ      = 8
	discTRSvcID    = 32 // 32 bytes
	discSubNQN     = 256
	discTRAddr     = 512 // 256 bytes
	discTSAS       = 768 // transport specific address subtype
	discTRSvcIDLen = 32
	discTRAddrLen  = 256
	// RDMA TSAS: QP service type, provider type, connection management.
	discRDMAQPType = discTSAS + 0
	discRDMAPrType = discTSAS + 1
	discRDMACMS    = discTSAS + 2
	// TCP TSAS: security type.
	discTCPSecType = discTSAS + 0
)

// PutDiscoveryHeader writes the discovery log page header into b (at least
// DiscoveryHdrSize bytes).
func PutDiscoveryHeader(b []byte, genctr, numrec uint64) {
	b = b[:DiscoveryHdrSize]
	clear(b)
	binary.LittleEndian.PutUint64(b[discGenCtr:], genctr)
	binary.LittleEndian.PutUint64(b[discNumRec:], numrec)
	binary.LittleEndian.PutUint16(b[discRecFmt:], 0)
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
	TCPSecType    uint8 // TCP only: TCPSecTypeNone or TCPSecTypeTLS13
}

// Encode writes the entry into b (at least DiscoveryEntSize bytes).
func (e *DiscoveryEntry) Encode(b []byte) {
	b = b[:DiscoveryEntSize]
	clear(b)
	le := binary.LittleEndian
	b[discTRType] = e.TransportType
	b[discAdrFam] = e.AddrFamily
	b[discSubType] = e.Subtype
	b[discTReq] = e.TREQ
	le.PutUint16(b[discPortID:], e.PortID)
	le.PutUint16(b[discCNTLID:], e.CNTLID)
	le.PutUint16(b[discASQSZ:], e.ASQSZ)
	putPadded(b[discTRSvcID:discTRSvcID+discTRSvcIDLen], e.TRSVCID)
	copy(b[discSubNQN:discSubNQN+NQNMaxLen], e.SubNQN)
	putPadded(b[discTRAddr:discTRAddr+discTRAddrLen], e.TRADDR)
	if e.TransportType == TransportRDMA {
		b[discRDMAQPType] = RDMAQPTypeConnected
		b[discRDMAPrType] = RDMAPrTypeNotSpec
		b[discRDMACMS] = RDMACMSRDMACM
	}
	if e.TransportType == TransportTCP {
		b[discTCPSecType] = e.TCPSecType
	}
}

// putPadded writes an ASCII string NUL-padded, as the Linux target does;
// hosts strip both NULs and spaces.
func putPadded(b []byte, s string) {
	copy(b[:len(b)-1], s)
}

// ErrShortDiscoveryLog is returned when a discovery log header or entry
// is shorter than its fixed size.
var ErrShortDiscoveryLog = errors.New("discovery log page too short")

// DiscoveryHeader is the start of the discovery log page.
type DiscoveryHeader struct {
	GenCtr uint64 // changes whenever the records do
	NumRec uint64
	RecFmt uint16
}

// ParseDiscoveryHeader decodes the header at the start of b, as a host
// reads it: the records follow at DiscoveryHdrSize, DiscoveryEntSize each.
func ParseDiscoveryHeader(b []byte) (DiscoveryHeader, error) {
	if len(b) < discRecFmt+2 {
		return DiscoveryHeader{}, ErrShortDiscoveryLog
	}
	le := binary.LittleEndian
	return DiscoveryHeader{le.Uint64(b[discGenCtr:]), le.Uint64(b[discNumRec:]), le.Uint16(b[discRecFmt:])}, nil
}

// ParseDiscoveryEntry decodes one record. Strings end at their first NUL,
// and trailing spaces are dropped, as hosts read them; the transport
// specific address subtype is not returned (Encode derives it from the
// transport type).
func ParseDiscoveryEntry(b []byte) (DiscoveryEntry, error) {
	if len(b) < DiscoveryEntSize {
		return DiscoveryEntry{}, ErrShortDiscoveryLog
	}
	le := binary.LittleEndian
	return DiscoveryEntry{
		TransportType: b[discTRType],
		AddrFamily:    b[discAdrFam],
		Subtype:       b[discSubType],
		TREQ:          b[discTReq],
		PortID:        le.Uint16(b[discPortID:]),
		CNTLID:        le.Uint16(b[discCNTLID:]),
		ASQSZ:         le.Uint16(b[discASQSZ:]),
		TRSVCID:       paddedString(b[discTRSvcID : discTRSvcID+discTRSvcIDLen]),
		SubNQN:        paddedString(b[discSubNQN : discSubNQN+ConnectNQNFieldSize]),
		TRADDR:        paddedString(b[discTRAddr : discTRAddr+discTRAddrLen]),
	}, nil
}

// paddedString reads a NUL- or space-padded ASCII field.
func paddedString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(bytes.TrimRight(b, " "))
}
