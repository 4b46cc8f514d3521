package tlspsk

import (
	"crypto/hkdf"
	"crypto/hmac"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
)

// Derivation is the encoding of HKDF-Expand-Label's info that a host's
// implementation uses. Nothing in an identity says which: it is
// configuration, per host.
type Derivation int

const (
	// DerivationRFC8446 is the HkdfLabel of RFC 8446 §7.1, as the NVMe/TCP
	// specification asks: libnvme 1.16 and later by default, SPDK, and
	// Linux 6.18 and later for secure channel concatenation.
	DerivationRFC8446 Derivation = iota
	// DerivationCompat is what libnvme up to 1.15 computed, and libnvme
	// 1.16 with nvme-cli --compat: the length little-endian, then "tls13 ",
	// the label and the context, neither prefixed with its length. Keys
	// that older hosts put in their key rings were derived this way, for
	// retained and TLS PSKs alike.
	DerivationCompat
	// DerivationLinux614 is the TLS PSK of secure channel concatenation in
	// Linux 6.14 to 6.17: as DerivationCompat but with the length
	// big-endian. Those kernels derive no retained PSK.
	DerivationLinux614
	// DerivationLibnvme17 is libnvme 1.7 to 1.9 (Ubuntu 24.04 has 1.8),
	// the first with version 1 identities: DerivationCompat, but the
	// context of a version 1 identity's TLS PSK is the whole identity, as
	// for version 0.
	DerivationLibnvme17
)

func (d Derivation) String() string {
	switch d {
	case DerivationRFC8446:
		return "RFC 8446"
	case DerivationCompat:
		return "compat"
	case DerivationLinux614:
		return "Linux 6.14"
	case DerivationLibnvme17:
		return "libnvme 1.7"
	}
	return fmt.Sprintf("Derivation(%d)", int(d))
}

// The two HKDF-Expand-Label labels of NVMe/TCP, without RFC 8446's
// "tls13 " prefix, which every derivation adds once.
const (
	labelRetained = "HostNQN"
	labelTLSPSK   = "nvme-tls-psk"
)

// hkdfLabel is the info of HKDF-Expand-Label(Secret, label, context,
// length) as d writes it.
func hkdfLabel(d Derivation, label, context string, length int) ([]byte, error) {
	label = "tls13 " + label
	info := make([]byte, 2, 4+len(label)+len(context))
	switch d {
	case DerivationRFC8446:
		if len(context) > 255 {
			return nil, fmt.Errorf("tlspsk: a context of %d bytes does not fit HKDF-Expand-Label (255 at most)", len(context))
		}
		binary.BigEndian.PutUint16(info, uint16(length))
		info = append(info, byte(len(label)))
		info = append(info, label...)
		info = append(info, byte(len(context)))
	case DerivationCompat, DerivationLibnvme17:
		binary.LittleEndian.PutUint16(info, uint16(length))
		info = append(info, label...)
	case DerivationLinux614:
		binary.BigEndian.PutUint16(info, uint16(length))
		info = append(info, label...)
	default:
		return nil, fmt.Errorf("tlspsk: unknown %v", d)
	}
	return append(info, context...), nil
}

// extractExpandLabel is NVMe/TCP's one derivation step:
// HKDF-Expand-Label(HKDF-Extract(0, ikm), label, context, len(ikm)).
func extractExpandLabel(h Hash, d Derivation, ikm []byte, label, context string) ([]byte, error) {
	info, err := hkdfLabel(d, label, context, len(ikm))
	if err != nil {
		return nil, err
	}
	prk, err := hkdf.Extract(h.hashFunc(), ikm, nil)
	if err != nil {
		return nil, err
	}
	defer clear(prk)
	return hkdf.Expand(h.hashFunc(), prk, string(info), len(ikm))
}

// RetainedPSK is the retained PSK for the host hostNQN: the configured
// key itself for HH 00, or HKDF-Expand-Label(HKDF-Extract(0, key),
// "HostNQN", hostNQN, len(key)) with the transform's hash, which binds a
// key shared by several hosts to each one.
func (k *ConfiguredPSK) RetainedPSK(hostNQN string, d Derivation) ([]byte, error) {
	if err := CheckNQN(hostNQN); err != nil {
		return nil, fmt.Errorf("tlspsk: host NQN: %w", err)
	}
	if d == DerivationLinux614 {
		return nil, errors.New("tlspsk: Linux derives no retained PSK; a host's libnvme does, with DerivationRFC8446 or DerivationCompat")
	}
	if k.transform == HashNone {
		return append([]byte(nil), k.key...), nil
	}
	return extractExpandLabel(k.transform, d, k.key, labelRetained, hostNQN)
}

// PSKDigest is the digest of a version 1 identity:
// base64(HMAC(psk, hostNQN || " " || subsysNQN || " NVMe-over-Fabrics")),
// psk being the retained or the generated PSK. It lets a controller tell
// which of several keys for the same host and subsystem a host uses.
func PSKDigest(h Hash, psk []byte, hostNQN, subsysNQN string) (string, error) {
	if h.Size() == 0 {
		return "", fmt.Errorf("tlspsk: a PSK digest needs SHA-256 or SHA-384, not %v", h)
	}
	if len(psk) != h.Size() {
		return "", fmt.Errorf("tlspsk: a %v PSK digest is made with a %d-byte PSK, not %d", h, h.Size(), len(psk))
	}
	m := hmac.New(h.hashFunc(), psk)
	m.Write([]byte(hostNQN + " " + subsysNQN + " NVMe-over-Fabrics"))
	return base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// TLSPSK is the PSK that TLS uses for id: HKDF-Expand-Label(
// HKDF-Extract(0, input), "nvme-tls-psk", context, L) with id's hash,
// where input is the retained PSK (or the generated PSK for a 'G'
// identity), L its length, and the context the whole identity for
// version 0 but only "<hh> <digest>" for version 1.
func TLSPSK(input []byte, id Identity, d Derivation) ([]byte, error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	if len(input) != id.Hash.Size() {
		return nil, fmt.Errorf("tlspsk: identity %s takes a %d-byte PSK, not %d", id.prefix(), id.Hash.Size(), len(input))
	}
	context := id.String()
	if id.Version == 1 && d != DerivationLibnvme17 {
		context = fmt.Sprintf("%02d %s", uint8(id.Hash), id.Digest)
	}
	return extractExpandLabel(id.Hash, d, input, labelTLSPSK, context)
}

// prefix is id's first field, "NVMe1R02", enough to name it in an error.
func (id Identity) prefix() string {
	s := id.String()
	return s[:min(len(s), len("NVMe1R02"))]
}

// HostPSK computes what libnvme computes when a host's key ring gets the
// PSK for a subsystem (nvme gen-tls-key --insert, nvme connect --tls-key):
// the retained identity of the given version and its TLS PSK.
func HostPSK(k *ConfiguredPSK, version int, hostNQN, subsysNQN string, d Derivation) (Identity, []byte, error) {
	id := Identity{Version: version, Hash: k.CipherHash(), HostNQN: hostNQN, SubsysNQN: subsysNQN}
	if version != 0 && version != 1 {
		return Identity{}, nil, identityError("version %d: want 0 or 1", version)
	}
	if err := CheckNQN(subsysNQN); err != nil {
		return Identity{}, nil, identityError("subsystem NQN: %v", err)
	}
	retained, err := k.RetainedPSK(hostNQN, d)
	if err != nil {
		return Identity{}, nil, err
	}
	defer clear(retained)
	if version == 1 {
		if id.Digest, err = PSKDigest(id.Hash, retained, hostNQN, subsysNQN); err != nil {
			return Identity{}, nil, err
		}
	}
	psk, err := TLSPSK(retained, id, d)
	if err != nil {
		return Identity{}, nil, err
	}
	return id, psk, nil
}
