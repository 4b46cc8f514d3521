package nvme

import "encoding/binary"

// CommandSize is the size of a submission queue entry.
const CommandSize = 64

// Command is a view over a 64-byte submission queue entry.
type Command []byte

// Offsets within a submission queue entry.
const (
	cmdOpcode = 0
	cmdFlags  = 1
	cmdCID    = 2
	cmdNSID   = 4
	cmdDPTR   = 24
	cmdCDW10  = 40
)

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
func (c Command) FabricsType() uint8 { return c[4] }

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
func (c Command) NLB() uint16 { return uint16(c.CDW(12)) }

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
func (c Command) ConnectRecFmt() uint16 { return binary.LittleEndian.Uint16(c[40:]) }

// ConnectQID is the queue the Connect creates (0 = admin).
func (c Command) ConnectQID() uint16 { return binary.LittleEndian.Uint16(c[ConnectSQEQID:]) }

// ConnectSQSize is the 0-based submission queue size.
func (c Command) ConnectSQSize() uint16 { return binary.LittleEndian.Uint16(c[ConnectSQESQSize:]) }

// ConnectCAttr holds the connect attributes (bit 2: SQ flow control disable).
func (c Command) ConnectCAttr() uint8 { return c[46] }

// ConnectKATO is the keep alive timeout in milliseconds (admin queue only).
func (c Command) ConnectKATO() uint32 { return binary.LittleEndian.Uint32(c[48:]) }

// SetConnect fills the Connect fields.
func (c Command) SetConnect(qid, sqsize uint16, kato uint32) {
	c[0] = OpFabrics
	c[4] = FabricsConnect
	binary.LittleEndian.PutUint16(c[40:], 0)
	binary.LittleEndian.PutUint16(c[42:], qid)
	binary.LittleEndian.PutUint16(c[44:], sqsize)
	binary.LittleEndian.PutUint32(c[48:], kato)
}

// Property Get/Set fields (Fabrics types 0x04 and 0x00).

// PropertySize8 reports whether the property access is 8 bytes wide
// (ATTRIB bits 2:0 = 1) rather than 4.
func (c Command) PropertySize8() bool { return c[40]&0x7 == 1 }

// PropertySizeValid reports whether ATTRIB.SIZE is one of the two defined
// sizes (000b: 4 bytes, 001b: 8 bytes).
func (c Command) PropertySizeValid() bool { return c[40]&0x7 <= 1 }

// PropertyOffset is the register offset.
func (c Command) PropertyOffset() uint32 { return binary.LittleEndian.Uint32(c[44:]) }

// PropertyValue is the value of a Property Set.
func (c Command) PropertyValue() uint64 { return binary.LittleEndian.Uint64(c[48:]) }

// SetProperty fills a Property Get (set=false) or Set.
func (c Command) SetProperty(set, size8 bool, offset uint32, value uint64) {
	c[0] = OpFabrics
	c[4] = FabricsPropertyGet
	if set {
		c[4] = FabricsPropertySet
	}
	c[40] = 0
	if size8 {
		c[40] = 1
	}
	binary.LittleEndian.PutUint32(c[44:], offset)
	binary.LittleEndian.PutUint64(c[48:], value)
}

// Get Log Page fields.

// LogID is the log page identifier.
func (c Command) LogID() uint8 { return uint8(c.CDW(10)) }

// LogSpecific is the LSP field.
func (c Command) LogSpecific() uint8 { return uint8(c.CDW(10)>>8) & 0x7f }

// LogRAE is the Retain Asynchronous Event bit.
func (c Command) LogRAE() bool { return c.CDW(10)&(1<<15) != 0 }

// LogLength is the number of bytes requested ((NUMD+1)*4).
func (c Command) LogLength() uint64 {
	numd := uint64(c.CDW(10)>>16) | uint64(c.CDW(11)&0xffff)<<16
	return (numd + 1) * 4
}

// LogOffset is the byte offset into the log page.
func (c Command) LogOffset() uint64 {
	return uint64(c.CDW(12)) | uint64(c.CDW(13))<<32
}

// Identify fields.

// CNS is the Controller or Namespace Structure selector.
func (c Command) CNS() uint8 { return uint8(c.CDW(10)) }

// CNTID is the controller identifier of Identify.
func (c Command) IdentifyCNTID() uint16 { return uint16(c.CDW(10) >> 16) }

// CSI is the command set identifier of Identify.
func (c Command) IdentifyCSI() uint8 { return uint8(c.CDW(11) >> 24) }

// FeatureID is the feature of Get/Set Features (CDW10 bits 0-7).
func (c Command) FeatureID() uint8 { return uint8(c.CDW(10)) }

// FeatureSelect is SEL of Get Features (CDW10 bits 8-10).
func (c Command) FeatureSelect() uint8 { return uint8(c.CDW(10)>>8) & 0x7 }

// FeatureSave is SV of Set Features (CDW10 bit 31).
func (c Command) FeatureSave() bool { return c.CDW(10)&(1<<31) != 0 }
