package nvme

import (
	"encoding/binary"
	"errors"
)

// Reservations (NVMe Base 2.0 section 8.19, NVM Command Set "Reservation"
// commands): hosts register a key on a namespace, then one of them (or,
// for the all-registrants types, every registrant) holds a reservation
// that limits what the others may do.

// Reservation types (RTYPE).
const (
	ResvNone                   = 0
	ResvWriteExclusive         = 1
	ResvExclusiveAccess        = 2
	ResvWriteExclusiveRegOnly  = 3
	ResvExclusiveAccessRegOnly = 4
	ResvWriteExclusiveAllRegs  = 5
	ResvExclusiveAccessAllRegs = 6
)

// ValidResvType reports whether t names one of the six reservation types.
func ValidResvType(t uint8) bool { return t >= ResvWriteExclusive && t <= ResvExclusiveAccessAllRegs }

// ResvAllRegistrants reports whether every registrant holds a reservation
// of type t.
func ResvAllRegistrants(t uint8) bool {
	return t == ResvWriteExclusiveAllRegs || t == ResvExclusiveAccessAllRegs
}

// Identify Namespace RESCAP bits: persistence through power loss, each
// type, and Ignore Existing Key as revision 1.3 defines it.
const (
	RESCAPPersist = 1 << 0
	RESCAPTypes   = 0x7e // bits 1-6: the six types
	RESCAPIEKEY   = 1 << 7
)

// Reservation Register action (CDW10 RREGA) and Change Persist Through
// Power Loss state (CPTPL).
const (
	ResvRegister   = 0
	ResvUnregister = 1
	ResvReplace    = 2

	CPTPLNoChange = 0
	CPTPLClear    = 2
	CPTPLSet      = 3
)

// Reservation Acquire (RACQA) and Release (RRELA) actions.
const (
	ResvAcquire         = 0
	ResvPreempt         = 1
	ResvPreemptAndAbort = 2

	ResvRelease = 0
	ResvClear   = 1
)

// CDW10 of Register, Acquire and Release.
const (
	resvActionMask  = 0x7
	resvIEKEY       = 1 << 3
	resvTypeShift   = 8
	resvCPTPLShift  = 30
	resvReportEDS   = 1 << 0 // CDW11 of Report
	resvReportNUMDs = 10
)

// ResvAction is the command's action (RREGA, RACQA, RRELA).
func (c Command) ResvAction() uint8 { return uint8(c.CDW(10) & resvActionMask) }

// ResvIEKEY is Ignore Existing Key.
func (c Command) ResvIEKEY() bool { return c.CDW(10)&resvIEKEY != 0 }

// ResvType is RTYPE of Acquire and Release.
func (c Command) ResvType() uint8 { return uint8(c.CDW(10) >> resvTypeShift) }

// ResvCPTPL is CPTPL of Register.
func (c Command) ResvCPTPL() uint8 { return uint8(c.CDW(10) >> resvCPTPLShift) }

// ResvReportLength is the byte count Report returns ((NUMD+1)*4).
func (c Command) ResvReportLength() uint64 { return (uint64(c.CDW(resvReportNUMDs)) + 1) * 4 }

// ResvReportEDS asks Report for the extended data structure.
func (c Command) ResvReportEDS() bool { return c.CDW(11)&resvReportEDS != 0 }

// SetResv sets CDW10 of Register, Acquire or Release.
func (c Command) SetResv(action uint8, iekey bool, rtype, cptpl uint8) {
	v := uint32(action&resvActionMask) | uint32(rtype)<<resvTypeShift | uint32(cptpl&3)<<resvCPTPLShift
	if iekey {
		v |= resvIEKEY
	}
	c.SetCDW(10, v)
}

// Data sizes of Register (CRKEY, NRKEY), Acquire (CRKEY, PRKEY) and
// Release (CRKEY).
const (
	ResvRegisterSize = 16
	ResvAcquireSize  = 16
	ResvReleaseSize  = 8
)

// ResvKeys are the keys a Register, Acquire or Release carries: the
// current key, and the new key (Register) or the preempt key (Acquire).
type ResvKeys struct {
	Current uint64
	Other   uint64
}

var errResvShort = errors.New("reservation data shorter than the command's keys")

// ParseResvKeys decodes the command data: CRKEY at 0, NRKEY or PRKEY at 8
// when the data has 16 bytes.
func ParseResvKeys(b []byte) (ResvKeys, error) {
	if len(b) < ResvReleaseSize {
		return ResvKeys{}, errResvShort
	}
	k := ResvKeys{Current: binary.LittleEndian.Uint64(b)}
	if len(b) >= ResvRegisterSize {
		k.Other = binary.LittleEndian.Uint64(b[8:])
	}
	return k, nil
}

// Encode writes the keys as a 16-byte Register or Acquire payload, or the
// first 8 bytes for Release.
func (k ResvKeys) Encode(b []byte) {
	binary.LittleEndian.PutUint64(b, k.Current)
	if len(b) >= ResvRegisterSize {
		binary.LittleEndian.PutUint64(b[8:], k.Other)
	}
}

// Reservation Status data structure: a 24-byte header (64 bytes in the
// extended form), then one entry per registrant: 24 bytes with a 64-bit
// host ID, or 64 bytes with the 128-bit one (extended).
const (
	ResvStatusHdrSize    = 24
	ResvStatusExtHdrSize = 64
	ResvEntrySize        = 24
	ResvExtEntrySize     = 64

	resvGen    = 0
	resvRType  = 4
	resvRegCtl = 5
	resvPTPLS  = 9

	resvEntCNTLID = 0
	resvEntRCSTS  = 2
	resvEntHostID = 8  // 64-bit host ID
	resvEntRKey   = 16 // non-extended
	resvExtRKey   = 8
	resvExtHostID = 16
)

// ResvRCSTSHolds (RCSTS bit 0): the registrant holds the reservation.
const ResvRCSTSHolds = 1 << 0

// ResvDynamicCNTLID is the controller ID a registrant entry carries in a
// subsystem of dynamic controllers.
const ResvDynamicCNTLID = 0xffff

// ResvRegistrant is one registered controller data structure.
type ResvRegistrant struct {
	CNTLID uint16
	Holds  bool
	HostID [HostIDSize]byte
	Key    uint64
}

// ResvStatus is the Reservation Status data structure.
type ResvStatus struct {
	Gen         uint32
	Type        uint8
	PTPL        bool
	Registrants []ResvRegistrant
}

// Encode writes as much of the structure as b holds (the host sizes the
// buffer with NUMD; REGCTL still counts every registrant) and zeroes the
// rest of b. ext selects the extended form.
func (s *ResvStatus) Encode(b []byte, ext bool) {
	clear(b)
	var hdr [ResvStatusExtHdrSize]byte
	binary.LittleEndian.PutUint32(hdr[resvGen:], s.Gen)
	hdr[resvRType] = s.Type
	binary.LittleEndian.PutUint16(hdr[resvRegCtl:], uint16(min(len(s.Registrants), 0xffff)))
	if s.PTPL {
		hdr[resvPTPLS] = 1
	}
	hdrSize, entSize := ResvStatusHdrSize, ResvEntrySize
	if ext {
		hdrSize, entSize = ResvStatusExtHdrSize, ResvExtEntrySize
	}
	n := copy(b, hdr[:hdrSize])
	var ent [ResvExtEntrySize]byte
	for _, r := range s.Registrants {
		if n >= len(b) {
			return
		}
		clear(ent[:])
		binary.LittleEndian.PutUint16(ent[resvEntCNTLID:], r.CNTLID)
		if r.Holds {
			ent[resvEntRCSTS] = ResvRCSTSHolds
		}
		if ext {
			binary.LittleEndian.PutUint64(ent[resvExtRKey:], r.Key)
			copy(ent[resvExtHostID:], r.HostID[:])
		} else {
			copy(ent[resvEntHostID:resvEntHostID+8], r.HostID[:8])
			binary.LittleEndian.PutUint64(ent[resvEntRKey:], r.Key)
		}
		n += copy(b[n:], ent[:entSize])
	}
}

// ParseResvStatus decodes a Reservation Status data structure, as many
// entries as b holds whole (REGCTL may count more).
func ParseResvStatus(b []byte, ext bool) (ResvStatus, int, error) {
	hdrSize, entSize := ResvStatusHdrSize, ResvEntrySize
	if ext {
		hdrSize, entSize = ResvStatusExtHdrSize, ResvExtEntrySize
	}
	if len(b) < hdrSize {
		return ResvStatus{}, 0, errors.New("reservation status shorter than its header")
	}
	s := ResvStatus{
		Gen:  binary.LittleEndian.Uint32(b[resvGen:]),
		Type: b[resvRType],
		PTPL: b[resvPTPLS]&1 != 0,
	}
	regctl := int(binary.LittleEndian.Uint16(b[resvRegCtl:]))
	for off := hdrSize; off+entSize <= len(b) && len(s.Registrants) < regctl; off += entSize {
		e := b[off : off+entSize]
		r := ResvRegistrant{
			CNTLID: binary.LittleEndian.Uint16(e[resvEntCNTLID:]),
			Holds:  e[resvEntRCSTS]&ResvRCSTSHolds != 0,
		}
		if ext {
			r.Key = binary.LittleEndian.Uint64(e[resvExtRKey:])
			copy(r.HostID[:], e[resvExtHostID:resvExtHostID+HostIDSize])
		} else {
			copy(r.HostID[:8], e[resvEntHostID:resvEntHostID+8])
			r.Key = binary.LittleEndian.Uint64(e[resvEntRKey:])
		}
		s.Registrants = append(s.Registrants, r)
	}
	return s, regctl, nil
}

// Reservation Notification log page (LogReservation): one notification per
// read, 64 bytes.
const (
	ResvLogSize = 64

	resvLogCount = 0
	resvLogType  = 8
	resvLogAvail = 9
	resvLogNSID  = 12
)

// Reservation Notification types.
const (
	ResvNoticeEmpty          = 0
	ResvNoticeRegPreempted   = 1
	ResvNoticeReleased       = 2
	ResvNoticeResvPreempted  = 3
	ResvNoticeMaxOutstanding = 255 // Number of Available Log Pages saturates here
)

// Reservation Notification Mask feature bits: a set bit suppresses the
// notification of that type.
const (
	ResvMaskRegPreempted  = 1 << ResvNoticeRegPreempted
	ResvMaskReleased      = 1 << ResvNoticeReleased
	ResvMaskResvPreempted = 1 << ResvNoticeResvPreempted
	ResvMaskAll           = ResvMaskRegPreempted | ResvMaskReleased | ResvMaskResvPreempted
)

// ResvNotice is one Reservation Notification log page.
type ResvNotice struct {
	Count     uint64 // 0: empty; gaps mean lost notifications
	Type      uint8
	Available uint8 // pages still queued after this one
	NSID      uint32
}

// Encode writes the page into b (at least ResvLogSize bytes).
func (n ResvNotice) Encode(b []byte) {
	b = b[:ResvLogSize]
	clear(b)
	binary.LittleEndian.PutUint64(b[resvLogCount:], n.Count)
	b[resvLogType] = n.Type
	b[resvLogAvail] = n.Available
	binary.LittleEndian.PutUint32(b[resvLogNSID:], n.NSID)
}

// ParseResvNotice decodes a Reservation Notification log page.
func ParseResvNotice(b []byte) (ResvNotice, error) {
	if len(b) < ResvLogSize {
		return ResvNotice{}, errors.New("reservation notification log shorter than 64 bytes")
	}
	return ResvNotice{
		Count:     binary.LittleEndian.Uint64(b[resvLogCount:]),
		Type:      b[resvLogType],
		Available: b[resvLogAvail],
		NSID:      binary.LittleEndian.Uint32(b[resvLogNSID:]),
	}, nil
}

// CTRATTHostID128 (Identify Controller CTRATT bit 0): the controller
// takes 128-bit host identifiers, which hosts read as "use the extended
// Reservation Status".
const CTRATTHostID128 = 1 << 0

// ResvPTPL is bit 0 of the Reservation Persistence feature.
const ResvPTPL = 1 << 0
