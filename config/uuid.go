package config

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
)

// namespaceUUIDSpace is the RFC 4122 name space of derived namespace
// UUIDs. Changing it would change every derived UUID, and hosts identify
// namespaces (and group multipath paths) by UUID.
var namespaceUUIDSpace = [16]byte{0x6e, 0x76, 0x6d, 0x65, 0x6f, 0x66, 0x2d, 0x74, 0x67, 0x74, 0x2d, 0x6e, 0x73, 0x2d, 0x76, 0x35}

// NamespaceUUID returns the configured UUID, or a version 5 (SHA-1,
// name-based) UUID derived from nqn+"/"+nsid, stable across restarts.
func NamespaceUUID(nqn string, nsid uint32, configured string) ([16]byte, error) {
	if configured != "" {
		u, err := ParseUUID(configured)
		if err == nil && u == ([16]byte{}) {
			// NVMe reads an all-zero UUID as "no UUID".
			err = fmt.Errorf("the nil UUID is reserved; leave uuid empty to derive one")
		}
		return u, err
	}
	h := sha1.New()
	h.Write(namespaceUUIDSpace[:])
	h.Write([]byte(nqn + "/" + strconv.FormatUint(uint64(nsid), 10)))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u, nil
}

// ParseUUID reads the textual form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
// (hex digits in either case).
func ParseUUID(s string) ([16]byte, error) {
	var u [16]byte
	bad := func() ([16]byte, error) {
		return [16]byte{}, fmt.Errorf("%q is not a UUID (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", s)
	}
	if len(s) != 36 {
		return bad()
	}
	i := 0
	for k := range u {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if s[i] != '-' {
				return bad()
			}
			i++
		}
		if _, err := hex.Decode(u[k:k+1], []byte(s[i:i+2])); err != nil {
			return bad()
		}
		i += 2
	}
	return u, nil
}

// FormatUUID writes the lower-case textual form.
func FormatUUID(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
