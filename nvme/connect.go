package nvme

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// ConnectDataSize is the size of the Connect command's data.
const ConnectDataSize = 1024

// NQNMaxLen is the longest NQN, not counting the terminating NUL.
const NQNMaxLen = 223

// DiscoveryNQN is the well-known NQN of the discovery subsystem.
const DiscoveryNQN = "nqn.2014-08.org.nvmexpress.discovery"

// ControllerIDDynamic in Connect data asks for any free controller ID.
const ControllerIDDynamic = 0xffff

// MinControllerID and MaxControllerID bound the controller IDs a subsystem
// may give out (1..FFEFh; the rest are reserved).
const (
	MinControllerID = 1
	MaxControllerID = 0xffef
)

// MaxANAGroups is the most ANA groups (IDs 1..MaxANAGroups) a subsystem
// reports: Identify Controller ANAGRPMAX and NANAGRPID.
const MaxANAGroups = 128

// MaxIOQueues is the most I/O queues one controller of this target grants,
// as the Linux target's default; the configuration and Set Features Number
// of Queues both stop there.
const MaxIOQueues = 128

// Offsets of the Connect fields a refusal points at (Connect Invalid
// Parameters carries them as IATTR/IPO in the completion's DW0).
const (
	ConnectSQEQID      = 42 // in the submission entry
	ConnectSQESQSize   = 44
	ConnectDataHostID  = 0 // in the 1024-byte data
	ConnectDataCNTLID  = 16
	ConnectDataSubNQN  = 256
	ConnectDataHostNQN = 512
	// ConnectNQNFieldSize is the width of each NQN field of the data,
	// NUL-terminated within it.
	ConnectNQNFieldSize = 256
	// HostIDSize is the size of the 128-bit host identifier.
	HostIDSize = 16
)

// ConnectInvalidParam is the DW0 of a Connect Invalid Parameters
// completion: IATTR (bit 16) says whether IPO, the byte offset of the
// offending field, is in the data (true) or the submission entry.
func ConnectInvalidParam(offset uint16, inData bool) uint32 {
	v := uint32(offset)
	if inData {
		v |= 1 << 16
	}
	return v
}

// ConnectData is the decoded data of a Connect command.
type ConnectData struct {
	HostID  [HostIDSize]byte
	CNTLID  uint16
	SubNQN  string
	HostNQN string
}

// ErrConnectData reports Connect data that cannot be decoded.
var ErrConnectData = errors.New("nvme: malformed connect data")

// ConnectDataError says which field of the Connect data is malformed. It
// matches ErrConnectData with errors.Is.
type ConnectDataError struct {
	Offset uint16 // ConnectDataSubNQN, ConnectDataHostNQN, or 0 for short data
}

func (e *ConnectDataError) Error() string {
	switch e.Offset {
	case ConnectDataSubNQN:
		return "nvme: malformed connect data: subsystem NQN empty or not NUL-terminated"
	case ConnectDataHostNQN:
		return "nvme: malformed connect data: host NQN empty or not NUL-terminated"
	}
	return "nvme: malformed connect data: shorter than 1024 bytes"
}

func (e *ConnectDataError) Is(target error) bool { return target == ErrConnectData }

// ParseConnectData decodes the 1024-byte Connect data. The NQN strings
// are NUL-terminated in 256-byte fields.
func ParseConnectData(b []byte) (ConnectData, error) {
	var d ConnectData
	if len(b) < ConnectDataSize {
		return d, &ConnectDataError{}
	}
	copy(d.HostID[:], b[ConnectDataHostID:ConnectDataHostID+HostIDSize])
	d.CNTLID = binary.LittleEndian.Uint16(b[ConnectDataCNTLID:])
	var ok bool
	if d.SubNQN, ok = cString(b[ConnectDataSubNQN : ConnectDataSubNQN+ConnectNQNFieldSize]); !ok {
		return d, &ConnectDataError{ConnectDataSubNQN}
	}
	if d.HostNQN, ok = cString(b[ConnectDataHostNQN : ConnectDataHostNQN+ConnectNQNFieldSize]); !ok {
		return d, &ConnectDataError{ConnectDataHostNQN}
	}
	return d, nil
}

// Encode writes d into b (at least ConnectDataSize bytes).
func (d ConnectData) Encode(b []byte) {
	clear(b[:ConnectDataSize])
	copy(b[ConnectDataHostID:ConnectDataHostID+HostIDSize], d.HostID[:])
	binary.LittleEndian.PutUint16(b[ConnectDataCNTLID:], d.CNTLID)
	copy(b[ConnectDataSubNQN:ConnectDataSubNQN+NQNMaxLen], d.SubNQN)
	copy(b[ConnectDataHostNQN:ConnectDataHostNQN+NQNMaxLen], d.HostNQN)
}

// cString returns the NUL-terminated string in b; ok is false when there is
// no terminator or the string is empty.
func cString(b []byte) (string, bool) {
	i := bytes.IndexByte(b, 0)
	if i <= 0 {
		return "", false
	}
	return string(b[:i]), true
}

// PutString writes s into the fixed-width field b, padded with spaces, as
// Identify's ASCII fields (serial, model, firmware) require.
func PutString(b []byte, s string) {
	n := copy(b, s)
	for i := n; i < len(b); i++ {
		b[i] = ' '
	}
}
