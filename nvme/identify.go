package nvme

import "encoding/binary"

// IdentifySize is the size of every Identify data structure.
const IdentifySize = 4096

// Controller types (Identify Controller CNTRLTYPE).
const (
	ControllerIO        = 1
	ControllerDiscovery = 2
)

// Identify Controller field offsets, from the NVMe base specification.
const (
	idVID      = 0
	idSSVID    = 2
	idSN       = 4  // 20 bytes
	idMN       = 24 // 40 bytes
	idFR       = 64 // 8 bytes
	idRAB      = 72
	idIEEE     = 73
	idCMIC     = 76
	idMDTS     = 77
	idCNTLID   = 78
	idVER      = 80
	idOAES     = 92
	idCTRATT   = 96
	idCNTRLTYP = 111
	idOACS     = 256
	idACL      = 258
	idAERL     = 259
	idFRMW     = 260
	idLPA      = 261
	idELPE     = 262
	idNPSS     = 263
	idWCTEMP   = 266
	idCCTEMP   = 268
	idKAS      = 320
	idANATT    = 342
	idANACAP   = 343
	idANAGRPMX = 344
	idNANAGRP  = 348
	idSQES     = 512
	idCQES     = 513
	idMAXCMD   = 514
	idNN       = 516
	idONCS     = 520
	idFUSES    = 522
	idFNA      = 524
	idVWC      = 525
	idAWUN     = 526
	idAWUPF    = 528
	idACWU     = 532
	idSGLS     = 536
	idMNAN     = 540
	idSUBNQN   = 768 // 256 bytes
	idIOCCSZ   = 1792
	idIORCSZ   = 1796
	idICDOFF   = 1800
	idFCATT    = 1802
	idMSDBD    = 1803
	idPSD0     = 2048
)

// CMIC bits.
const (
	CMICMultiPort       = 1 << 0
	CMICMultiController = 1 << 1
	CMICANA             = 1 << 3 // Asymmetric Namespace Access reporting
)

// OAES bits.
const (
	OAESNSAttrChanged   = 1 << 8
	OAESANAChange       = 1 << 11
	OAESDiscoveryChange = 1 << 31
)

// LPA bits.
const (
	LPAPerNamespaceSMART = 1 << 0
	LPACmdEffects        = 1 << 1
	LPAExtendedData      = 1 << 2
)

// ONCS bits.
const (
	ONCSCompare      = 1 << 0
	ONCSWriteUncor   = 1 << 1
	ONCSDSM          = 1 << 2
	ONCSWriteZeroes  = 1 << 3
	ONCSReservations = 1 << 5
)

// SGLS bits.
const (
	SGLSSupported = 1 << 0  // SGLs supported, no alignment requirement
	SGLSKeyed     = 1 << 2  // keyed SGL data block descriptor
	SGLSOffset    = 1 << 20 // offset addressing: in-capsule data
)

// IdentifyController holds the fields of Identify Controller the target
// sets; everything else is zero.
type IdentifyController struct {
	VID, SSVID     uint16
	Serial         string
	Model          string
	Firmware       string
	RAB            uint8
	CMIC           uint8
	MDTS           uint8
	CNTLID         uint16
	Version        uint32
	OAES           uint32
	CTRATT         uint32
	ControllerType uint8
	ACL, AERL      uint8
	FRMW           uint8
	LPA            uint8
	ELPE           uint8
	KAS            uint16 // keep alive granularity, 100 ms units
	ANATT          uint8  // ANA transition time, seconds
	ANACAP         uint8
	ANAGRPMAX      uint32 // highest ANA group ID
	NANAGRPID      uint32 // number of ANA group IDs
	MaxCmd         uint16
	NN             uint32
	ONCS           uint16
	FUSES          uint16
	VWC            uint8
	SGLS           uint32
	MNAN           uint32
	SubNQN         string
	IOCCSZ, IORCSZ uint32 // 16-byte units
	MSDBD          uint8
	WCTEMP, CCTEMP uint16
	PowerMaxCentiW uint16
}

// Encode writes the structure into b (at least IdentifySize bytes).
func (id *IdentifyController) Encode(b []byte) {
	b = b[:IdentifySize]
	clear(b)
	le := binary.LittleEndian
	le.PutUint16(b[idVID:], id.VID)
	le.PutUint16(b[idSSVID:], id.SSVID)
	PutString(b[idSN:idSN+20], id.Serial)
	PutString(b[idMN:idMN+40], id.Model)
	PutString(b[idFR:idFR+8], id.Firmware)
	b[idRAB] = id.RAB
	b[idCMIC] = id.CMIC
	b[idMDTS] = id.MDTS
	le.PutUint16(b[idCNTLID:], id.CNTLID)
	le.PutUint32(b[idVER:], id.Version)
	le.PutUint32(b[idOAES:], id.OAES)
	le.PutUint32(b[idCTRATT:], id.CTRATT)
	b[idCNTRLTYP] = id.ControllerType
	b[idACL] = id.ACL
	b[idAERL] = id.AERL
	b[idFRMW] = id.FRMW
	b[idLPA] = id.LPA
	b[idELPE] = id.ELPE
	le.PutUint16(b[idWCTEMP:], id.WCTEMP)
	le.PutUint16(b[idCCTEMP:], id.CCTEMP)
	le.PutUint16(b[idKAS:], id.KAS)
	b[idANATT] = id.ANATT
	b[idANACAP] = id.ANACAP
	le.PutUint32(b[idANAGRPMX:], id.ANAGRPMAX)
	le.PutUint32(b[idNANAGRP:], id.NANAGRPID)
	// Submission entries are 64 bytes, completions 16: required and
	// maximum sizes as powers of two.
	b[idSQES] = 6<<4 | 6
	b[idCQES] = 4<<4 | 4
	le.PutUint16(b[idMAXCMD:], id.MaxCmd)
	le.PutUint32(b[idNN:], id.NN)
	le.PutUint16(b[idONCS:], id.ONCS)
	le.PutUint16(b[idFUSES:], id.FUSES)
	b[idVWC] = id.VWC
	le.PutUint32(b[idSGLS:], id.SGLS)
	le.PutUint32(b[idMNAN:], id.MNAN)
	copy(b[idSUBNQN:idSUBNQN+NQNMaxLen], id.SubNQN)
	le.PutUint32(b[idIOCCSZ:], id.IOCCSZ)
	le.PutUint32(b[idIORCSZ:], id.IORCSZ)
	b[idMSDBD] = id.MSDBD
	// Power state 0: maximum power in centiwatts; the rest stay zero.
	le.PutUint16(b[idPSD0:], id.PowerMaxCentiW)
}

// Identify Namespace field offsets.
const (
	nsNSZE   = 0
	nsNCAP   = 8
	nsNUSE   = 16
	nsNSFEAT = 24
	nsNLBAF  = 25
	nsFLBAS  = 26
	nsNMIC   = 30
	nsRESCAP = 31
	nsDLFEAT = 33
	nsANAGRP = 92
	nsNPWG   = 64
	nsNPWA   = 66
	nsNPDG   = 68
	nsNPDA   = 70
	nsNOWS   = 72
	nsNSATTR = 99
	nsNGUID  = 104
	nsEUI64  = 120
	nsLBAF0  = 128
)

// VWC bits: a volatile write cache is present (bit 0), and Flush's
// broadcast NSID support (bits 2:1, 11b: supported).
const (
	VWCPresent        = 1 << 0
	VWCFlushBroadcast = 0x3 << 1
)

// DLFEAT bits: what deallocated blocks read as (bits 2:0, 001b: zeros) and
// whether Write Zeroes supports the Deallocate bit (bit 3).
const (
	DLFEATReadsZeroes           = 0x1
	DLFEATWriteZeroesDeallocate = 1 << 3
)

// NMICShared (Identify Namespace NMIC bit 0): the namespace may be
// attached to two or more controllers at once.
const NMICShared = 1 << 0

// NSFEAT bits.
const (
	NSFEATThinProvisioning = 1 << 0
	NSFEATOptimalIO        = 1 << 4 // NPWG, NPWA, NPDG, NPDA, NOWS are valid
)

// IdentifyNamespace holds the fields of Identify Namespace the target sets.
type IdentifyNamespace struct {
	Blocks        uint64 // NSZE = NCAP = NUSE
	BlockShift    uint8  // LBADS: log2 of the block size
	NSFEAT        uint8
	NMIC          uint8 // NMICShared: may be attached to several controllers
	RESCAP        uint8 // reservation capabilities (RESCAP* bits)
	ANAGroupID    uint32
	DLFEAT        uint8 // bits 0-2 = 1: deallocated blocks read as zeros
	WriteProtect  bool
	NGUID         [16]byte
	EUI64         [8]byte
	OptimalBlocks uint16 // NPWG/NOWS, 0-based; used when NSFEAT bit 4 set
}

// Encode writes the structure into b (at least IdentifySize bytes).
func (ns *IdentifyNamespace) Encode(b []byte) {
	b = b[:IdentifySize]
	clear(b)
	le := binary.LittleEndian
	le.PutUint64(b[nsNSZE:], ns.Blocks)
	le.PutUint64(b[nsNCAP:], ns.Blocks)
	le.PutUint64(b[nsNUSE:], ns.Blocks)
	b[nsNSFEAT] = ns.NSFEAT
	b[nsNLBAF] = 0 // one LBA format (0-based count)
	b[nsFLBAS] = 0
	b[nsNMIC] = ns.NMIC
	b[nsRESCAP] = ns.RESCAP
	b[nsDLFEAT] = ns.DLFEAT
	le.PutUint32(b[nsANAGRP:], ns.ANAGroupID)
	if ns.NSFEAT&NSFEATOptimalIO != 0 {
		for _, off := range []int{nsNPWG, nsNPWA, nsNPDG, nsNPDA, nsNOWS} {
			le.PutUint16(b[off:], ns.OptimalBlocks)
		}
	}
	if ns.WriteProtect {
		b[nsNSATTR] = 1
	}
	copy(b[nsNGUID:], ns.NGUID[:])
	copy(b[nsEUI64:], ns.EUI64[:])
	// LBA format 0: no metadata, LBADS, relative performance best.
	b[nsLBAF0+2] = ns.BlockShift
}

// Namespace identification descriptor types.
const (
	NIDTEUI64 = 0x01
	NIDTNGUID = 0x02
	NIDTUUID  = 0x03
	NIDTCSI   = 0x04
)

// PutNSDescriptor appends one namespace identification descriptor at
// b[off:] and returns the offset after it, or -1 if it does not fit.
func PutNSDescriptor(b []byte, off int, nidt uint8, nid []byte) int {
	end := off + 4 + len(nid)
	if end > len(b) {
		return -1
	}
	b[off], b[off+1], b[off+2], b[off+3] = nidt, byte(len(nid)), 0, 0
	copy(b[off+4:], nid)
	return end
}

// MaxNamespaces is the largest namespace ID the target supports, reported
// as Identify NN and MNAN, and what the configuration accepts: the Linux
// target's NVMET_MAX_NAMESPACES. One constant so that the two agree.
const MaxNamespaces = 1024

// Identify I/O Command Set data structure (CNS 1Ch): command set
// combination vectors of 8 bytes each; bit 0 of a vector is the NVM
// command set.
const (
	CommandSetVectorSize = 8
	CommandSetVectorNVM  = 1 << CSINVM
)

// PutCommandSetVector writes the one combination the target supports, the
// NVM command set alone, as vector 0 of b.
func PutCommandSetVector(b []byte) {
	binary.LittleEndian.PutUint64(b[:CommandSetVectorSize], CommandSetVectorNVM)
}

// PutNSIDList writes a list of namespace IDs (Identify CNS 0x02) into b,
// which must be IdentifySize bytes; ids beyond 1024 entries are dropped.
func PutNSIDList(b []byte, ids []uint32) {
	b = b[:IdentifySize]
	clear(b)
	for i, id := range ids {
		if i == IdentifySize/4 {
			break
		}
		binary.LittleEndian.PutUint32(b[4*i:], id)
	}
}
