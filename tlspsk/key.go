package tlspsk

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
)

// Hash is the hash code of the interchange format's HH and of an identity:
// the NVMe hash identifiers, which TLS ties to a cipher suite
// (TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384).
type Hash uint8

const (
	// HashNone, in the interchange format only, says the configured PSK is
	// the retained PSK as it is.
	HashNone   Hash = 0
	HashSHA256 Hash = 1
	HashSHA384 Hash = 2
)

// Size is the digest size of h, which is also the length of every PSK
// that h derives; 0 for HashNone and unknown codes.
func (h Hash) Size() int {
	switch h {
	case HashSHA256:
		return sha256.Size
	case HashSHA384:
		return sha512.Size384
	}
	return 0
}

func (h Hash) String() string {
	switch h {
	case HashNone:
		return "none"
	case HashSHA256:
		return "SHA-256"
	case HashSHA384:
		return "SHA-384"
	}
	return fmt.Sprintf("hash(%02d)", uint8(h))
}

// hashFunc is the hash.Hash constructor of h, nil for none.
func (h Hash) hashFunc() func() hash.Hash {
	switch h {
	case HashSHA256:
		return sha256.New
	case HashSHA384:
		return sha512.New384
	}
	return nil
}

// ConfiguredPSK is a configured PSK: the key an administrator gives both
// the host and the controller, with the hash that turns it into a retained
// PSK. Its fields are unexported, and it formats as "[redacted]" with every
// verb, so that a key does not end up in a log.
type ConfiguredPSK struct {
	transform Hash
	key       []byte
}

// Errors of ParseConfiguredPSK and NewConfiguredPSK; none repeats the key.
var (
	ErrKeyFormat = errors.New(`not a TLS PSK: want "NVMeTLSkey-1:HH:<base64>:" as nvme gen-tls-key prints it`)
	ErrKeyHash   = errors.New("TLS PSK: HH (the retained PSK's hash) must be 00 (none), 01 (SHA-256) or 02 (SHA-384)")
	ErrKeyBase64 = errors.New("TLS PSK: the key is not valid base64")
	ErrKeyLength = errors.New("TLS PSK: the key must be 32 bytes for HH 01, 48 for HH 02, and 32 or 48 for HH 00 (plus a 4-byte CRC)")
	ErrKeyCRC    = errors.New("TLS PSK: CRC mismatch; the key was mistyped or truncated")
)

const keyPrefix = "NVMeTLSkey-1:"

// NewConfiguredPSK checks key's length against transform and copies it.
func NewConfiguredPSK(transform Hash, key []byte) (*ConfiguredPSK, error) {
	if transform != HashNone && transform.Size() == 0 {
		return nil, ErrKeyHash
	}
	if !keyLengthFits(transform, len(key)) {
		return nil, ErrKeyLength
	}
	return &ConfiguredPSK{transform: transform, key: append([]byte(nil), key...)}, nil
}

// keyLengthFits is libnvme's rule: a transform fixes the length, and
// without one the length picks the hash.
func keyLengthFits(transform Hash, n int) bool {
	if transform == HashNone {
		return n == sha256.Size || n == sha512.Size384
	}
	return n == transform.Size()
}

// ParseConfiguredPSK decodes the PSK interchange format,
// "NVMeTLSkey-1:HH:<base64 of key || CRC-32 little-endian>:", checking the
// CRC as libnvme does (zlib's CRC-32, the IEEE polynomial). Surrounding
// whitespace, a key file's newline, is ignored; nothing else is.
func ParseConfiguredPSK(s string) (*ConfiguredPSK, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, keyPrefix)
	if !ok || len(rest) < 4 || rest[2] != ':' || rest[len(rest)-1] != ':' {
		return nil, ErrKeyFormat
	}
	var transform Hash
	switch rest[:2] {
	case "00":
	case "01":
		transform = HashSHA256
	case "02":
		transform = HashSHA384
	default:
		return nil, ErrKeyHash
	}
	b64 := rest[3 : len(rest)-1]
	if strings.Contains(b64, ":") {
		return nil, ErrKeyFormat
	}
	raw, err := decodeBase64(b64)
	if err != nil {
		return nil, ErrKeyBase64
	}
	defer clear(raw)
	n := len(raw) - 4
	if n < 0 || !keyLengthFits(transform, n) {
		return nil, ErrKeyLength
	}
	if crc32.ChecksumIEEE(raw[:n]) != binary.LittleEndian.Uint32(raw[n:]) {
		return nil, ErrKeyCRC
	}
	return &ConfiguredPSK{transform: transform, key: append([]byte(nil), raw[:n]...)}, nil
}

// decodeBase64 is strict standard base64: the encoding/base64 decoder
// skips CR and LF, and a key that decodes must encode back to itself.
func decodeBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, base64.CorruptInputError(strings.IndexAny(s, "\r\n"))
	}
	return base64.StdEncoding.Strict().DecodeString(s)
}

// Encode returns the interchange format, as nvme gen-tls-key prints it. It
// is the one way to print the key.
func (k *ConfiguredPSK) Encode() string {
	raw := make([]byte, len(k.key)+4)
	copy(raw, k.key)
	binary.LittleEndian.PutUint32(raw[len(k.key):], crc32.ChecksumIEEE(k.key))
	out := fmt.Sprintf("%s%02x:%s:", keyPrefix, uint8(k.transform), base64.StdEncoding.EncodeToString(raw))
	clear(raw)
	return out
}

// Transform is the HH of the interchange format: the hash that turns the
// configured PSK into the retained PSK, HashNone if none does.
func (k *ConfiguredPSK) Transform() Hash { return k.transform }

// Bytes is the key itself; the caller must not change it.
func (k *ConfiguredPSK) Bytes() []byte { return k.key }

// CipherHash is the hash of the identities and TLS PSKs this key makes:
// the transform's, or with none the one whose size is the key's, as
// libnvme picks it (a 48-byte key cannot feed TLS_AES_128_GCM_SHA256).
func (k *ConfiguredPSK) CipherHash() Hash {
	if k.transform != HashNone {
		return k.transform
	}
	if len(k.key) == sha512.Size384 {
		return HashSHA384
	}
	return HashSHA256
}

// Equal reports whether two keys are the same, in constant time.
func (k *ConfiguredPSK) Equal(o *ConfiguredPSK) bool {
	if k == nil || o == nil {
		return k == o
	}
	return k.transform == o.transform && hmac.Equal(k.key, o.key)
}

// Clear overwrites the key bytes.
func (k *ConfiguredPSK) Clear() {
	if k != nil {
		clear(k.key)
	}
}

// String, GoString and Format keep keys out of logs and error messages,
// whatever the verb.
func (ConfiguredPSK) String() string                { return "[redacted]" }
func (ConfiguredPSK) GoString() string              { return "[redacted]" }
func (ConfiguredPSK) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte("[redacted]")) }
