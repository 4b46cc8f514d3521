package nvme

// Opcodes is how many opcodes a command set has: the opcode is one byte.
const Opcodes = 1 << 8

// Admin command opcodes.
const (
	AdminDeleteSQ     = 0x00
	AdminCreateSQ     = 0x01
	AdminGetLogPage   = 0x02
	AdminDeleteCQ     = 0x04
	AdminCreateCQ     = 0x05
	AdminIdentify     = 0x06
	AdminAbort        = 0x08
	AdminSetFeatures  = 0x09
	AdminGetFeatures  = 0x0a
	AdminAsyncEvent   = 0x0c
	AdminNSManagement = 0x0d
	AdminFWCommit     = 0x10
	AdminFWDownload   = 0x11
	AdminKeepAlive    = 0x18
	AdminDirectiveSnd = 0x19
	AdminDirectiveRcv = 0x1a
	AdminNSAttach     = 0x15
	AdminFormatNVM    = 0x80
)

// NVM command set I/O opcodes.
const (
	IOFlush        = 0x00
	IOWrite        = 0x01
	IORead         = 0x02
	IOWriteUncor   = 0x04
	IOCompare      = 0x05
	IOWriteZeroes  = 0x08
	IODatasetMgmt  = 0x09
	IOResvRegister = 0x0d
	IOResvReport   = 0x0e
	IOResvAcquire  = 0x11
	IOResvRelease  = 0x15
)

// OpFabrics is the opcode shared by all Fabrics commands; the command type
// is in byte 4.
const OpFabrics = 0x7f

// Fabrics command types.
const (
	FabricsPropertySet = 0x00
	FabricsConnect     = 0x01
	FabricsPropertyGet = 0x04
	FabricsAuthSend    = 0x05
	FabricsAuthRecv    = 0x06
	FabricsDisconnect  = 0x08
)

// Feature identifiers.
const (
	FeatArbitration   = 0x01
	FeatPowerMgmt     = 0x02
	FeatTempThreshold = 0x04
	FeatErrorRecovery = 0x05
	FeatVolatileWC    = 0x06
	FeatNumQueues     = 0x07
	FeatIRQCoalesce   = 0x08
	FeatIRQConfig     = 0x09
	FeatWriteAtomic   = 0x0a
	FeatAsyncEvent    = 0x0b
	FeatKeepAlive     = 0x0f
	FeatHostID        = 0x81
	FeatResvMask      = 0x82 // Reservation Notification Mask
	FeatResvPersist   = 0x83 // Reservation Persistence (PTPL)
)

// Log page identifiers.
const (
	LogError          = 0x01
	LogSMART          = 0x02
	LogFirmwareSlot   = 0x03
	LogChangedNS      = 0x04
	LogCmdEffects     = 0x05
	LogANA            = 0x0c
	LogDiscovery      = 0x70
	LogReservation    = 0x80 // Reservation Notification
	LogSupportedPages = 0x00
)

// Identify CNS values.
const (
	CNSNamespace        = 0x00
	CNSController       = 0x01
	CNSActiveNSList     = 0x02
	CNSNSDescList       = 0x03
	CNSCSINamespace     = 0x05
	CNSCSIController    = 0x06
	CNSCSIActiveNSList  = 0x07
	CNSIndependentNS    = 0x08
	CNSAllocatedNSList  = 0x10
	CNSCommandSetVector = 0x1c
)

// Command set identifiers.
const CSINVM = 0x00

// Asynchronous event types and information used by the target.
const (
	AsyncTypeNotice         = 0x2
	AsyncTypeIOCommandSet   = 0x6 // I/O command set specific status
	AsyncIOResvLogAvailable = 0x00
	AsyncNoticeNSChanged    = 0x00
	AsyncNoticeANAChange    = 0x03
	AsyncNoticeDiscoveryLog = 0xf0
)

// AsyncEventResult is the completion DW0 of an Asynchronous Event Request:
// the event type (bits 2:0), its information (15:8) and the log page that
// tells more (23:16).
func AsyncEventResult(typ, info, logPage uint8) uint32 {
	return uint32(typ) | uint32(info)<<8 | uint32(logPage)<<16
}
