package nvme

import "encoding/binary"

// CommandSize is the size of a submission queue entry.
const CommandSize = 64

// NSIDBroadcast is the NSID that names every namespace (Flush), and
// NSIDListLimit the first NSID an active namespace list may not start
// after (FFFFFFFEh and FFFFFFFFh are invalid there).
const (
	NSIDBroadcast = 0xffffffff
	NSIDListLimit = 0xfffffffe
)

// Command is a view over a 64-byte submission queue entry.
type Command []byte

// Offsets within a submission queue entry (NVMe base specification,
// "Common Command Format"; NVMe-oF "Fabrics Command").
const (
	cmdOpcode      = 0
	cmdFlags       = 1
	cmdCID         = 2
	cmdNSID        = 4
	cmdFabricsType = 4 // Fabrics commands: FCTYPE replaces the NSID
	cmdDPTR        = 24
	cmdCDW10       = 40
	cmdCDW11       = 44
	cmdCDW12       = 48
)

// Fabrics command fields, after the data pointer (NVMe-oF "Connect
// Command", "Property Get/Set Command").
const (
	connectRecFmt  = 40
	connectQID     = ConnectSQEQID
	connectSQSize  = ConnectSQESQSize
	connectCAttr   = 46
	connectKATO    = 48
	propertyAttrib = 40 // ATTRIB: bits 2:0 are the access size
	propertyOffset = 44
	propertyValue  = 48

	propertySizeMask = 0x7
	propertySize4    = 0 // ATTRIB.SIZE 000b: 4 bytes
	propertySize8    = 1 // ATTRIB.SIZE 001b: 8 bytes
)

// CDW10 of Get Log Page: LID (bits 7:0), LSP (14:8), RAE (15), NUMDL (31:16);
// CDW11 bits 15:0 are NUMDU; CDW12-13 the byte offset.
const (
	logLIDMask    = 0xff
	logLSPShift   = 8
	logLSPMask    = 0x7f
	logRAE        = 1 << 15
	logNUMDLShift = 16
	logNUMDUMask  = 0xffff
	logNUMDUShift = 16 // NUMDU is bits 31:16 of the dword count
)

// CDW10-11 of Identify: CNS (CDW10 bits 7:0), CNTID (31:16), CSI (CDW11 31:24).
const (
	identifyCNSMask    = 0xff
	identifyCNTIDShift = 16
	identifyCSIShift   = 24
)

// CDW10 of Get and Set Features: FID (bits 7:0), SEL (10:8, Get), SV (31, Set).
const (
	featureFIDMask  = 0xff
	featureSELShift = 8
	featureSELMask  = 0x7
	featureSV       = 1 << 31
)

// CDW10 of Abort: SQID (bits 15:0) and CID (31:16) of the command to
// abort. Bit 0 of the result (Dword 0) is set when it was not aborted.
const (
	abortSQIDMask   = 0xffff
	abortCIDShift   = 16
	AbortNotAborted = 1
)

// CDW12 of Read, Write, Compare and Write Zeroes: NLB (bits 15:0, 0-based),
// DEAC (25, Write Zeroes), PRINFO (29:26), FUA (30) and LR (31).
const (
	CDW12NLBMask = 0xffff
	CDW12DEAC    = 1 << 25
	CDW12FUA     = 1 << 30
	CDW12LR      = 1 << 31
)

// Dataset Management: CDW10 bits 7:0 are NR, the 0-based number of ranges;
// CDW11 holds the attributes, of which the target acts on AD (bit 2).
const (
	DSMNRMask         = 0xff
	DSMAttrDeallocate = 1 << 2
	// DSMRangeSize is the size of one range descriptor in the data.
	DSMRangeSize = 16
	// DSMMaxRanges is how many ranges NR can describe.
	DSMMaxRanges = DSMNRMask + 1
)

// Offsets within a Dataset Management range descriptor.
const (
	dsmRangeAttributes = 0
	dsmRangeNLB        = 4 // 1-based, unlike the NLB of I/O commands
	dsmRangeSLBA       = 8
)

// DSMRange is a view over one 16-byte Dataset Management range.
type DSMRange []byte

// NLB is the number of logical blocks of the range (1-based; 0 is empty).
func (d DSMRange) NLB() uint32 { return binary.LittleEndian.Uint32(d[dsmRangeNLB:]) }

// SLBA is the first logical block of the range.
func (d DSMRange) SLBA() uint64 { return binary.LittleEndian.Uint64(d[dsmRangeSLBA:]) }

// Set fills the range, for test hosts.
func (d DSMRange) Set(slba uint64, nlb uint32) {
	clear(d[:DSMRangeSize])
	binary.LittleEndian.PutUint32(d[dsmRangeNLB:], nlb)
	binary.LittleEndian.PutUint64(d[dsmRangeSLBA:], slba)
}

// Get Features Host Identifier: CDW11 bit 0 (EXHID) asks for the 128-bit
// identifier, the only one fabrics has.
const (
	FeatHostIDExtended = 1 << 0
	HostIDExtSize      = 16
)

// Set Features Number of Queues: CDW11 (and the result) hold NSQR in bits
// 15:0 and NCQR in 31:16, both 0-based; 0xffff is invalid.
const (
	numQueuesMask      = 0xffff
	numQueuesNCQRShift = 16
	numQueuesInvalid   = 0xffff
)

// NumQueues decodes the 0-based submission and completion queue counts of
// a Number of Queues value; ok is false when either is FFFFh.
func NumQueues(v uint32) (nsqr, ncqr uint32, ok bool) {
	nsqr, ncqr = v&numQueuesMask, v>>numQueuesNCQRShift
	return nsqr, ncqr, nsqr != numQueuesInvalid && ncqr != numQueuesInvalid
}

// NumQueuesValue encodes 0-based queue counts as a Number of Queues value.
func NumQueuesValue(nsqr, ncqr uint32) uint32 {
	return nsqr&numQueuesMask | ncqr<<numQueuesNCQRShift
}

// Flags bits.
const (
	FlagsFuseMask  = 0x03
	FuseFirst      = 0x01
	FuseSecond     = 0x02
	FlagsPSDTMask  = 0xc0
	PSDTSGLContig  = 0x40 // SGLs for data, metadata buffer contiguous: what fabrics hosts send
	PSDTSGLSegment = 0x80
)

// Opcode is byte 0.
func (c Command) Opcode() uint8 { return c[cmdOpcode] }

// Flags holds FUSE (bits 0-1) and PSDT (bits 6-7).
func (c Command) Flags() uint8 { return c[cmdFlags] }

// Fuse returns the fused operation bits.
func (c Command) Fuse() uint8 { return c[cmdFlags] & FlagsFuseMask }

// CID is the command identifier.
func (c Command) CID() uint16 { return binary.LittleEndian.Uint16(c[cmdCID:]) }

// NSID is the namespace identifier.
func (c Command) NSID() uint32 { return binary.LittleEndian.Uint32(c[cmdNSID:]) }

// FabricsType is the command type of a Fabrics command (byte 4).
func (c Command) FabricsType() uint8 { return c[cmdFabricsType] }

// SGL is the first SGL descriptor, in the data pointer.
func (c Command) SGL() SGLDescriptor { return SGLDescriptor(c[cmdDPTR : cmdDPTR+SGLSize]) }

// CDW returns command dword n (10..15).
func (c Command) CDW(n int) uint32 {
	return binary.LittleEndian.Uint32(c[cmdCDW10+4*(n-10):])
}

// SLBA is the starting LBA of an I/O command (CDW10-11).
func (c Command) SLBA() uint64 { return binary.LittleEndian.Uint64(c[cmdCDW10:]) }

// NLB is the 0-based number of logical blocks of Read, Write, Compare and
// Write Zeroes (CDW12 bits 0-15).
func (c Command) NLB() uint16 { return uint16(c.CDW(12) & CDW12NLBMask) }

// FUA is Force Unit Access of Read, Write and Write Zeroes (CDW12 bit 30).
func (c Command) FUA() bool { return c.CDW(12)&CDW12FUA != 0 }

// DEAC is Deallocate of Write Zeroes (CDW12 bit 25).
func (c Command) DEAC() bool { return c.CDW(12)&CDW12DEAC != 0 }

// DSMRanges is the number of ranges a Dataset Management command carries
// (CDW10 NR, 0-based).
func (c Command) DSMRanges() uint32 { return c.CDW(10)&DSMNRMask + 1 }

// DSMDeallocate is the Attribute - Deallocate bit of Dataset Management.
func (c Command) DSMDeallocate() bool { return c.CDW(11)&DSMAttrDeallocate != 0 }

// SetOpcode and the setters below build commands, for hosts in tests.
func (c Command) SetOpcode(op uint8) { c[cmdOpcode] = op }

// SetFlags sets byte 1.
func (c Command) SetFlags(f uint8) { c[cmdFlags] = f }

// SetCID sets the command identifier.
func (c Command) SetCID(id uint16) { binary.LittleEndian.PutUint16(c[cmdCID:], id) }

// SetNSID sets the namespace identifier.
func (c Command) SetNSID(n uint32) { binary.LittleEndian.PutUint32(c[cmdNSID:], n) }

// SetCDW sets command dword n (10..15).
func (c Command) SetCDW(n int, v uint32) {
	binary.LittleEndian.PutUint32(c[cmdCDW10+4*(n-10):], v)
}

// SetSLBA sets CDW10-11.
func (c Command) SetSLBA(lba uint64) { binary.LittleEndian.PutUint64(c[cmdCDW10:], lba) }

// Connect command fields (Fabrics type 0x01).

// ConnectRecFmt is the record format (must be 0).
func (c Command) ConnectRecFmt() uint16 { return binary.LittleEndian.Uint16(c[connectRecFmt:]) }

// ConnectQID is the queue the Connect creates (0 = admin).
func (c Command) ConnectQID() uint16 { return binary.LittleEndian.Uint16(c[connectQID:]) }

// ConnectSQSize is the 0-based submission queue size.
func (c Command) ConnectSQSize() uint16 { return binary.LittleEndian.Uint16(c[connectSQSize:]) }

// ConnectCAttr holds the connect attributes (bit 2: SQ flow control disable).
func (c Command) ConnectCAttr() uint8 { return c[connectCAttr] }

// SetConnectCAttr sets the connect attributes.
func (c Command) SetConnectCAttr(a uint8) { c[connectCAttr] = a }

// ConnectSQFlowDisable is the CATTR bit by which the host disables SQ flow
// control: completions then carry no SQ head, and over TCP a read's last
// C2HData PDU may complete it (the SUCCESS flag).
const ConnectSQFlowDisable = 1 << 2

// SQHDFlowDisabled is the SQHD of a Connect response that disabled SQ flow
// control.
const SQHDFlowDisabled = 0xffff

// ConnectKATO is the keep alive timeout in milliseconds (admin queue only).
func (c Command) ConnectKATO() uint32 { return binary.LittleEndian.Uint32(c[connectKATO:]) }

// SetConnect fills the Connect fields.
func (c Command) SetConnect(qid, sqsize uint16, kato uint32) {
	c[cmdOpcode] = OpFabrics
	c[cmdFabricsType] = FabricsConnect
	binary.LittleEndian.PutUint16(c[connectRecFmt:], 0)
	binary.LittleEndian.PutUint16(c[connectQID:], qid)
	binary.LittleEndian.PutUint16(c[connectSQSize:], sqsize)
	binary.LittleEndian.PutUint32(c[connectKATO:], kato)
}

// Property Get/Set fields (Fabrics types 0x04 and 0x00).

// PropertySize8 reports whether the property access is 8 bytes wide
// (ATTRIB bits 2:0 = 1) rather than 4.
func (c Command) PropertySize8() bool { return c[propertyAttrib]&propertySizeMask == propertySize8 }

// PropertySizeValid reports whether ATTRIB.SIZE is one of the two defined
// sizes (000b: 4 bytes, 001b: 8 bytes).
func (c Command) PropertySizeValid() bool { return c[propertyAttrib]&propertySizeMask <= propertySize8 }

// PropertyOffset is the register offset.
func (c Command) PropertyOffset() uint32 { return binary.LittleEndian.Uint32(c[propertyOffset:]) }

// PropertyValue is the value of a Property Set.
func (c Command) PropertyValue() uint64 { return binary.LittleEndian.Uint64(c[propertyValue:]) }

// SetProperty fills a Property Get (set=false) or Set.
func (c Command) SetProperty(set, size8 bool, offset uint32, value uint64) {
	c[cmdOpcode] = OpFabrics
	c[cmdFabricsType] = FabricsPropertyGet
	if set {
		c[cmdFabricsType] = FabricsPropertySet
	}
	c[propertyAttrib] = propertySize4
	if size8 {
		c[propertyAttrib] = propertySize8
	}
	binary.LittleEndian.PutUint32(c[propertyOffset:], offset)
	binary.LittleEndian.PutUint64(c[propertyValue:], value)
}

// Get Log Page fields.

// LogID is the log page identifier.
func (c Command) LogID() uint8 { return uint8(c.CDW(10) & logLIDMask) }

// LogSpecific is the LSP field.
func (c Command) LogSpecific() uint8 { return uint8(c.CDW(10)>>logLSPShift) & logLSPMask }

// LogRAE is the Retain Asynchronous Event bit.
func (c Command) LogRAE() bool { return c.CDW(10)&logRAE != 0 }

// LogLength is the number of bytes requested ((NUMD+1)*4).
func (c Command) LogLength() uint64 {
	numd := uint64(c.CDW(10)>>logNUMDLShift) | uint64(c.CDW(11)&logNUMDUMask)<<logNUMDUShift
	return (numd + 1) * 4
}

// LogOffset is the byte offset into the log page.
func (c Command) LogOffset() uint64 {
	return uint64(c.CDW(12)) | uint64(c.CDW(13))<<32
}

// Identify fields.

// CNS is the Controller or Namespace Structure selector.
func (c Command) CNS() uint8 { return uint8(c.CDW(10) & identifyCNSMask) }

// IdentifyCNTID is the controller identifier of Identify.
func (c Command) IdentifyCNTID() uint16 { return uint16(c.CDW(10) >> identifyCNTIDShift) }

// IdentifyCSI is the command set identifier of Identify.
func (c Command) IdentifyCSI() uint8 { return uint8(c.CDW(11) >> identifyCSIShift) }

// AbortSQID is the submission queue of the command Abort names.
func (c Command) AbortSQID() uint16 { return uint16(c.CDW(10) & abortSQIDMask) }

// AbortCID is the command identifier of the command Abort names.
func (c Command) AbortCID() uint16 { return uint16(c.CDW(10) >> abortCIDShift) }

// SetAbort names the command to abort, for test hosts.
func (c Command) SetAbort(sqid, cid uint16) { c.SetCDW(10, uint32(cid)<<abortCIDShift|uint32(sqid)) }

// FeatureID is the feature of Get/Set Features (CDW10 bits 0-7).
func (c Command) FeatureID() uint8 { return uint8(c.CDW(10) & featureFIDMask) }

// FeatureSelect is SEL of Get Features (CDW10 bits 8-10).
func (c Command) FeatureSelect() uint8 { return uint8(c.CDW(10)>>featureSELShift) & featureSELMask }

// FeatureSave is SV of Set Features (CDW10 bit 31).
func (c Command) FeatureSave() bool { return c.CDW(10)&featureSV != 0 }

// FeatureValue is the feature's value of Set Features, or its argument
// for Get Features (CDW11).
func (c Command) FeatureValue() uint32 { return c.CDW(11) }
