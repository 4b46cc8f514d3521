package nvme

// Controller register offsets, reached by Property Get/Set on fabrics.
const (
	RegCAP     = 0x00 // 8 bytes; a 4-byte access reads one half
	RegCAPHigh = 0x04
	RegVS      = 0x08
	RegCC      = 0x14
	RegCSTS    = 0x1c
	RegNSSR    = 0x20
)

// Version encodes a specification version for VS and Identify VER.
func Version(major, minor, tertiary uint32) uint32 {
	return major<<16 | minor<<8 | tertiary
}

// CAP fields.

// CAP builds the Controller Capabilities register: mqes is the 0-based
// maximum queue entries, timeout is in 500 ms units. It advertises the NVM
// command set only (CSS bit 37) and 4 KiB pages; CSS bit 43 and CRMS stay
// clear because the Linux host then expects I/O command set profiles and
// ready-mode handshakes we do not implement.
func CAP(mqes uint16, timeout uint8) uint64 {
	return uint64(mqes) | capCQR | uint64(timeout)<<capTOShift | capCSSNVM
}

// CAP bits: MQES is bits 15:0, CQR 16, TO 31:24, CSS 44:37 (bit 37: the
// NVM command set).
const (
	capCQR     = 1 << 16
	capTOShift = 24
	capCSSNVM  = 1 << 37
)

// CAPLow and CAPHigh are the halves of CAP a 4-byte Property Get at RegCAP
// or RegCAPHigh reads.
func CAPLow(cap uint64) uint64  { return cap & 0xffffffff }
func CAPHigh(cap uint64) uint64 { return cap >> 32 }

// CC fields.
const (
	CCEnable     = 1 << 0
	CCShnShift   = 14
	CCShnMask    = 3 << CCShnShift
	CCIOSQEShift = 16
	CCIOCQEShift = 20
	CCMPSShift   = 7
	CCAMSShift   = 11
	CCCSSShift   = 4
	// The widths of the fields above: IOSQES, IOCQES and MPS are 4 bits,
	// AMS and CSS 3.
	CCQESMask = 0xf
	CCMPSMask = 0xf
	CCAMSMask = 0x7
	CCCSSMask = 0x7
	// CCIOSQE and CCIOCQE are the only entry sizes fabrics allows, as
	// log2 of CommandSize and CompletionSize.
	CCIOSQE = 6
	CCIOCQE = 4
)

// CSTS fields.
const (
	CSTSReady          = 1 << 0
	CSTSFatal          = 1 << 1
	CSTSShstMask       = 3 << 2
	CSTSShstProcessing = 1 << 2
	CSTSShstComplete   = 2 << 2
)
