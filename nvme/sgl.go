package nvme

import "encoding/binary"

// SGLSize is the size of an SGL descriptor.
const SGLSize = 16

// SGL descriptor identifiers (type in the high nibble, subtype in the low).
const (
	SGLDataBlockOffset   = 0x01 // data block, offset: in-capsule data
	SGLLastSegmentOffset = 0x31 // last segment, offset: descriptor list in-capsule
	SGLKeyed             = 0x40 // keyed data block, address
	SGLKeyedInvalidate   = 0x4f // keyed data block, address, invalidate the key
)

// SGL descriptor types (high nibble).
const (
	SGLTypeDataBlock   = 0x0
	SGLTypeSegment     = 0x2
	SGLTypeLastSegment = 0x3
	SGLTypeKeyed       = 0x4
)

// Offsets within an SGL descriptor. Keyed descriptors have a 24-bit length
// and the key where unkeyed ones have a 32-bit length and reserved bytes.
const (
	sglAddress   = 0
	sglLength    = 8
	sglKeyedLen  = 8 // 3 bytes
	sglKey       = 11
	sglReserved  = 12 // 3 bytes, unkeyed only
	sglID        = 15
	sglTypeShift = 4
	sglSubMask   = 0xf
)

// SGLDescriptor is a view over a 16-byte SGL descriptor.
type SGLDescriptor []byte

// ID is the descriptor identifier byte (type<<4 | subtype).
func (d SGLDescriptor) ID() uint8 { return d[sglID] }

// Type is the descriptor type.
func (d SGLDescriptor) Type() uint8 { return d[sglID] >> sglTypeShift }

// Subtype is the descriptor subtype.
func (d SGLDescriptor) Subtype() uint8 { return d[sglID] & sglSubMask }

// Address is the host address (keyed) or the offset into the in-capsule
// data (offset subtype).
func (d SGLDescriptor) Address() uint64 { return binary.LittleEndian.Uint64(d[sglAddress:]) }

// Length is the 32-bit length of an unkeyed descriptor.
func (d SGLDescriptor) Length() uint32 { return binary.LittleEndian.Uint32(d[sglLength:]) }

// KeyedLength is the 24-bit length of a keyed data block descriptor.
func (d SGLDescriptor) KeyedLength() uint32 {
	return uint32(d[sglKeyedLen]) | uint32(d[sglKeyedLen+1])<<8 | uint32(d[sglKeyedLen+2])<<16
}

// Key is the remote key of a keyed data block descriptor.
func (d SGLDescriptor) Key() uint32 { return binary.LittleEndian.Uint32(d[sglKey:]) }

// SetKeyed builds a keyed data block descriptor.
func (d SGLDescriptor) SetKeyed(addr uint64, length uint32, key uint32, invalidate bool) {
	binary.LittleEndian.PutUint64(d[sglAddress:], addr)
	d[sglKeyedLen], d[sglKeyedLen+1], d[sglKeyedLen+2] = byte(length), byte(length>>8), byte(length>>16)
	binary.LittleEndian.PutUint32(d[sglKey:], key)
	d[sglID] = SGLKeyed
	if invalidate {
		d[sglID] = SGLKeyedInvalidate
	}
}

// SetOffset builds an unkeyed descriptor of the given identifier (data
// block or last segment, offset subtype).
func (d SGLDescriptor) SetOffset(id uint8, offset uint64, length uint32) {
	binary.LittleEndian.PutUint64(d[sglAddress:], offset)
	binary.LittleEndian.PutUint32(d[sglLength:], length)
	clear(d[sglReserved:sglID])
	d[sglID] = id
}
