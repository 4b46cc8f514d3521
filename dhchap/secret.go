package dhchap

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Secret is a DH-HMAC-CHAP secret: the key bytes and the hash its
// transformation uses (0: none, the key is used as it is).
type Secret struct {
	Transform uint8 // the NN of DHHC-1:NN: 0, or nvme.HashSHA256..SHA512
	Key       []byte
}

// Errors of ParseSecret; each says what to fix without echoing the secret.
var (
	ErrSecretFormat    = errors.New(`not a DHHC-1 secret: want "DHHC-1:NN:<base64>:" as nvme gen-dhchap-key prints it`)
	ErrSecretTransform = errors.New("DHHC-1 secret: NN (the key transformation hash) must be 00, 01, 02 or 03")
	ErrSecretBase64    = errors.New("DHHC-1 secret: the key is not valid base64")
	ErrSecretLength    = errors.New("DHHC-1 secret: the key must be 32, 48 or 64 bytes (plus a 4-byte CRC)")
	ErrSecretCRC       = errors.New("DHHC-1 secret: CRC mismatch; the key was mistyped or truncated")
)

// ParseSecret decodes the "DHHC-1:NN:<base64 of key || CRC-32 LE>:" form.
// Surrounding whitespace (a key file's newline) is ignored.
func ParseSecret(s string) (*Secret, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, "DHHC-1:")
	if !ok || len(rest) < 4 || rest[2] != ':' {
		return nil, ErrSecretFormat
	}
	var t uint8
	switch rest[:2] {
	case "00":
	case "01":
		t = nvme.HashSHA256
	case "02":
		t = nvme.HashSHA384
	case "03":
		t = nvme.HashSHA512
	default:
		return nil, ErrSecretTransform
	}
	b64 := strings.TrimSuffix(rest[3:], ":")
	if strings.Contains(b64, ":") {
		return nil, ErrSecretFormat
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, ErrSecretBase64
	}
	n := len(raw) - 4
	if n != 32 && n != 48 && n != 64 {
		clear(raw)
		return nil, ErrSecretLength
	}
	if crc32.ChecksumIEEE(raw[:n]) != binary.LittleEndian.Uint32(raw[n:]) {
		clear(raw)
		return nil, ErrSecretCRC
	}
	return &Secret{Transform: t, Key: raw[:n:n]}, nil
}

// Encode returns the DHHC-1 representation, for generating keys and for
// tests. It is the one way to print a secret.
func (s *Secret) Encode() string {
	raw := make([]byte, len(s.Key)+4)
	copy(raw, s.Key)
	binary.LittleEndian.PutUint32(raw[len(s.Key):], crc32.ChecksumIEEE(s.Key))
	out := fmt.Sprintf("DHHC-1:%02d:%s:", s.Transform, base64.StdEncoding.EncodeToString(raw))
	clear(raw)
	return out
}

// String and GoString keep secrets out of logs and error messages.
func (s Secret) String() string   { return "[redacted]" }
func (s Secret) GoString() string { return "[redacted]" }

// Equal reports whether two secrets are the same, in constant time.
func (s *Secret) Equal(o *Secret) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.Transform == o.Transform && hmac.Equal(s.Key, o.Key)
}

// Clear overwrites the key bytes.
func (s *Secret) Clear() {
	if s != nil {
		clear(s.Key)
	}
}

// HashLen is the digest size of a hash ID, 0 for an unknown one.
func HashLen(id uint8) int {
	if h := newHash(id); h != nil {
		return h().Size()
	}
	return 0
}

// HashName is the configuration name of a hash ID.
func HashName(id uint8) string {
	switch id {
	case nvme.HashSHA256:
		return "sha256"
	case nvme.HashSHA384:
		return "sha384"
	case nvme.HashSHA512:
		return "sha512"
	}
	return fmt.Sprintf("hash(%d)", id)
}

// HashIDs are the hashes DH-HMAC-CHAP defines, and GroupIDs the DH
// groups, each in the order a controller prefers them by default (the
// Linux target's defaults first).
var (
	HashIDs  = []uint8{nvme.HashSHA256, nvme.HashSHA384, nvme.HashSHA512}
	GroupIDs = []uint8{nvme.DHGroupNull, nvme.DHGroup2048, nvme.DHGroup3072, nvme.DHGroup4096,
		nvme.DHGroup6144, nvme.DHGroup8192}
)

// HashNames and GroupNames are the configuration names of HashIDs and
// GroupIDs.
func HashNames() []string  { return namesOf(HashIDs, HashName) }
func GroupNames() []string { return namesOf(GroupIDs, GroupName) }

func namesOf(ids []uint8, name func(uint8) string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = name(id)
	}
	return out
}

// HashByName is the ID of a hash name, 0 if unknown.
func HashByName(name string) uint8 {
	for _, id := range HashIDs {
		if HashName(id) == name {
			return id
		}
	}
	return 0
}

func newHash(id uint8) func() hash.Hash {
	switch id {
	case nvme.HashSHA256:
		return sha256.New
	case nvme.HashSHA384:
		return sha512.New384
	case nvme.HashSHA512:
		return sha512.New
	}
	return nil
}

// TransformKey derives the key a response is computed with: the secret
// itself when its transform is 0, otherwise HMAC(secret, nqn ||
// "NVMe-over-Fabrics") with the secret's hash, as long as that hash's
// digest. The host key is transformed with the host NQN, the controller
// key with the subsystem NQN. The caller clears the result.
func TransformKey(s *Secret, nqn string) []byte {
	h := newHash(s.Transform)
	if h == nil {
		return append([]byte(nil), s.Key...)
	}
	m := hmac.New(h, s.Key)
	m.Write([]byte(nqn))
	m.Write([]byte("NVMe-over-Fabrics"))
	return m.Sum(nil)
}

// AugmentChallenge is the challenge a response covers when a DH group
// is in use: HMAC(H(session key), challenge) with the negotiated hash.
func AugmentChallenge(hashID uint8, sessionKey, challenge []byte) []byte {
	h := newHash(hashID)
	d := h()
	d.Write(sessionKey)
	hk := d.Sum(nil)
	m := hmac.New(h, hk)
	m.Write(challenge)
	out := m.Sum(nil)
	clear(hk)
	return out
}

// Roles of a response: the host answers C1 with "HostHost", the
// controller answers C2 with "Controller".
const (
	roleHost       = "HostHost"
	roleController = "Controller"
)

// HostResponse is R1 = HMAC(Kh', C1 || S1 || T_ID || SC_C || "HostHost"
// || NQNh || 00h || NQNc) with integers little-endian, where Kh' is the
// transformed host key and C1 the (augmented) challenge.
func HostResponse(hashID uint8, key, challenge []byte, seq uint32, tid uint16, scc uint8, hostNQN, subNQN string) []byte {
	return response(hashID, key, challenge, seq, tid, scc, roleHost, hostNQN, subNQN)
}

// ControllerResponse is R2 = HMAC(Kc', C2 || S2 || T_ID || SC_C ||
// "Controller" || NQNc || 00h || NQNh).
func ControllerResponse(hashID uint8, key, challenge []byte, seq uint32, tid uint16, scc uint8, subNQN, hostNQN string) []byte {
	return response(hashID, key, challenge, seq, tid, scc, roleController, subNQN, hostNQN)
}

func response(hashID uint8, key, challenge []byte, seq uint32, tid uint16, scc uint8, role, nqn1, nqn2 string) []byte {
	m := hmac.New(newHash(hashID), key)
	var b [7]byte
	binary.LittleEndian.PutUint32(b[0:], seq)
	binary.LittleEndian.PutUint16(b[4:], tid)
	b[6] = scc
	m.Write(challenge)
	m.Write(b[:])
	m.Write([]byte(role))
	m.Write([]byte(nqn1))
	m.Write([]byte{0})
	m.Write([]byte(nqn2))
	return m.Sum(nil)
}
