package nvme

import (
	"bytes"
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

// ConnectData is the decoded data of a Connect command.
type ConnectData struct {
	HostID  [16]byte
	CNTLID  uint16
	SubNQN  string
	HostNQN string
}

// ErrConnectData reports Connect data that cannot be decoded.
var ErrConnectData = errors.New("nvme: malformed connect data")

// ParseConnectData decodes the 1024-byte Connect data. The NQN strings
// are NUL-terminated in 256-byte fields.
func ParseConnectData(b []byte) (ConnectData, error) {
	var d ConnectData
	if len(b) < ConnectDataSize {
		return d, ErrConnectData
	}
	copy(d.HostID[:], b[0:16])
	d.CNTLID = uint16(b[16]) | uint16(b[17])<<8
	var ok1, ok2 bool
	d.SubNQN, ok1 = cString(b[256:512])
	d.HostNQN, ok2 = cString(b[512:768])
	if !ok1 || !ok2 {
		return d, ErrConnectData
	}
	return d, nil
}

// Encode writes d into b (at least ConnectDataSize bytes).
func (d ConnectData) Encode(b []byte) {
	clear(b[:ConnectDataSize])
	copy(b[0:16], d.HostID[:])
	b[16], b[17] = byte(d.CNTLID), byte(d.CNTLID>>8)
	copy(b[256:256+NQNMaxLen], d.SubNQN)
	copy(b[512:512+NQNMaxLen], d.HostNQN)
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
