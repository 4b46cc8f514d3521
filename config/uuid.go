package config

import (
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
)

// namespaceUUIDSpace is the name space of derived namespace UUIDs
// (RFC 4122 version 5).
var namespaceUUIDSpace = [16]byte{0x6e, 0x76, 0x6d, 0x65, 0x6f, 0x66, 0x2d, 0x74, 0x67, 0x74, 0x2d, 0x6e, 0x73, 0x2d, 0x76, 0x35}

// NamespaceUUID returns the configured UUID, or one derived from the
// subsystem NQN and NSID, stable across restarts.
func NamespaceUUID(nqn string, nsid uint32, configured string) ([16]byte, error) {
	if configured != "" {
		return ParseUUID(configured)
	}
	h := sha1.New()
	h.Write(namespaceUUIDSpace[:])
	fmt.Fprintf(h, "%s/%d", nqn, nsid)
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u, nil
}

// ParseUUID reads the 8-4-4-4-12 hex form.
func ParseUUID(s string) ([16]byte, error) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("%q is not a UUID (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", s)
	}
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil {
		return u, fmt.Errorf("%q is not a UUID: %w", s, err)
	}
	copy(u[:], b)
	return u, nil
}

// FormatUUID writes the 8-4-4-4-12 hex form.
func FormatUUID(u [16]byte) string {
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", binary.BigEndian.Uint32(u[0:]), binary.BigEndian.Uint16(u[4:]),
		binary.BigEndian.Uint16(u[6:]), binary.BigEndian.Uint16(u[8:]), u[10:])
}
