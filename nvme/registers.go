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
	return uint64(mqes) | 1<<16 /* CQR */ | uint64(timeout)<<24 | 1<<37
}

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
)

// CSTS fields.
const (
	CSTSReady          = 1 << 0
	CSTSFatal          = 1 << 1
	CSTSShstMask       = 3 << 2
	CSTSShstProcessing = 1 << 2
	CSTSShstComplete   = 2 << 2
)
