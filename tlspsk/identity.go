package tlspsk

import (
	"errors"
	"fmt"
	"strings"
)

// Identity is a PSK identity, what a host names its PSK by in the
// ClientHello: "NVMe<v><R|G><hh> <host NQN> <subsystem NQN>", and for
// version 1 a space and the PSK digest after that.
type Identity struct {
	// Version 0 is NVMe/TCP 1.0's identity; version 1 (TP 8018) adds the
	// digest, which tells two keys for the same pair apart, so that a key
	// can be replaced while the old one is still in use.
	Version int
	// Generated marks a PSK made by secure channel concatenation ('G')
	// rather than retained from a configured PSK ('R').
	Generated bool
	Hash      Hash // the hash of the cipher suite, HashSHA256 or HashSHA384
	HostNQN   string
	SubsysNQN string
	Digest    string // version 1 only: PSKDigest's base64
}

// ErrIdentity is the error every identity that cannot be parsed or is not
// well formed wraps; the rest of the message says which field is wrong.
var ErrIdentity = errors.New("malformed PSK identity")

// maxNQNLen is the longest NQN in bytes (NVMe Base, NVMe Qualified Names):
// nvme.NQNMaxLen, repeated so that this package depends on nothing of the
// protocol's.
const maxNQNLen = 223

// maxIdentityLen is the longest well-formed identity: version 1 with two
// longest NQNs and a SHA-384 digest. A longer one is refused before it is
// split.
const maxIdentityLen = len("NVMe1R02 ") + maxNQNLen + 1 + maxNQNLen + 1 + 64

func identityError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrIdentity}, args...)...)
}

// ParseIdentity reads an identity the way a strict controller must: every
// field as libnvme and Linux write it and nothing more, so that a parsed
// identity formats back to the same string.
func ParseIdentity(s string) (Identity, error) {
	var id Identity
	if len(s) > maxIdentityLen {
		return id, identityError("%d bytes is longer than any identity (%d)", len(s), maxIdentityLen)
	}
	if len(s) < len("NVMe0R01 ") || !strings.HasPrefix(s, "NVMe") {
		return id, identityError("%s does not start with NVMe<version><R|G><hash> and a space", quote(s))
	}
	switch s[4] {
	case '0', '1':
		id.Version = int(s[4] - '0')
	default:
		return id, identityError("version %s: want 0 or 1", quote(s[4:5]))
	}
	switch s[5] {
	case 'R':
	case 'G':
		id.Generated = true
	default:
		return id, identityError("type %s: want R (retained) or G (generated)", quote(s[5:6]))
	}
	switch s[6:8] {
	case "01":
		id.Hash = HashSHA256
	case "02":
		id.Hash = HashSHA384
	default:
		return id, identityError("hash %s: want 01 (SHA-256) or 02 (SHA-384)", quote(s[6:8]))
	}
	if s[8] != ' ' {
		return id, identityError("%s: want a space after the hash", quote(s[:9]))
	}
	fields := strings.Split(s[9:], " ")
	if want := 2 + id.Version; len(fields) != want {
		return id, identityError("version %d wants %d fields after the hash, separated by single spaces, not %d",
			id.Version, want, len(fields))
	}
	id.HostNQN, id.SubsysNQN = fields[0], fields[1]
	if id.Version == 1 {
		id.Digest = fields[2]
	}
	return id, id.checkFields()
}

// Validate reports what is wrong with id, as ParseIdentity would.
func (id Identity) Validate() error {
	if id.Version != 0 && id.Version != 1 {
		return identityError("version %d: want 0 or 1", id.Version)
	}
	if id.Hash != HashSHA256 && id.Hash != HashSHA384 {
		return identityError("hash %s: want SHA-256 or SHA-384", id.Hash)
	}
	if id.Version == 0 && id.Digest != "" {
		return identityError("a version 0 identity has no digest")
	}
	return id.checkFields()
}

func (id Identity) checkFields() error {
	if err := CheckNQN(id.HostNQN); err != nil {
		return identityError("host NQN: %v", err)
	}
	if err := CheckNQN(id.SubsysNQN); err != nil {
		return identityError("subsystem NQN: %v", err)
	}
	if id.Version == 1 {
		if raw, err := decodeBase64(id.Digest); err != nil || len(raw) != id.Hash.Size() {
			return identityError("PSK digest %s: want the base64 of a %d-byte %s HMAC (%d characters)",
				quote(id.Digest), id.Hash.Size(), id.Hash, base64Len(id.Hash.Size()))
		}
	}
	return nil
}

// CheckNQN applies the NQN rules a PSK identity depends on: spaces
// separate its fields, so an NQN has none; at most 223 bytes of printable
// ASCII. Like the Linux host and target, it does not insist on the "nqn."
// prefix.
func CheckNQN(nqn string) error {
	if nqn == "" {
		return errors.New("empty")
	}
	if len(nqn) > maxNQNLen {
		return fmt.Errorf("%d bytes is longer than %d", len(nqn), maxNQNLen)
	}
	for i := 0; i < len(nqn); i++ {
		if nqn[i] <= ' ' || nqn[i] > '~' {
			return fmt.Errorf("%s: byte %d is not printable ASCII other than a space", quote(nqn), i)
		}
	}
	return nil
}

// String is the identity as it goes on the wire and into the host's key
// ring: libnvme's and Linux's "NVMe%d%c%02d %s %s[ %s]".
func (id Identity) String() string {
	kind := 'R'
	if id.Generated {
		kind = 'G'
	}
	s := fmt.Sprintf("NVMe%d%c%02d %s %s", id.Version, kind, uint8(id.Hash), id.HostNQN, id.SubsysNQN)
	if id.Version == 1 {
		s += " " + id.Digest
	}
	return s
}

func base64Len(n int) int { return (n + 2) / 3 * 4 }

// quote quotes a field of a refused identity for an error message, cut
// short: the identity comes from the network before anything is proven.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q…", s[:max])
	}
	return fmt.Sprintf("%q", s)
}
