package tlspsk

import (
	"crypto/hmac"
	"errors"
	"fmt"
)

// Why ServerPSK refuses an identity. Each error it returns wraps one of
// these, or ErrIdentity for one it cannot parse, and says more.
var (
	ErrGeneratedIdentity = errors.New("the identity names a generated PSK (secure channel concatenation), which no configured key stands for")
	ErrWrongHost         = errors.New("the identity is for another host")
	ErrWrongSubsystem    = errors.New("the identity is for another subsystem")
	ErrHashMismatch      = errors.New("the identity's hash is not the configured key's")
	ErrDigestMismatch    = errors.New("the identity's PSK digest is not the configured key's")
)

// ServerPSK is the controller's side of the handshake: given the key
// configured for the host and the identity that host offered in its
// ClientHello, it returns the TLS PSK to complete the handshake with, or
// an error that says why the identity does not go with this key and this
// host and subsystem. It serves every identity a Linux host offers: a
// host looks for version 1 SHA-384, version 1 SHA-256, then version 0
// keys in its key ring, and a key's identity carries its configured key's
// hash.
//
// TLS comes before the Connect command, so a controller learns who is
// calling from the identity itself: it parses the identity to find the
// key, calls ServerPSK, and later holds the Connect command's NQNs to the
// identity's.
//
// Both versions are answered; only version 1 can be checked against the
// key, by its digest. A version 0 identity from a host that holds another
// key, or derives it another way, passes here and fails the handshake on
// its binder.
func ServerPSK(k *ConfiguredPSK, offered, hostNQN, subsysNQN string, d Derivation) ([]byte, error) {
	id, err := ParseIdentity(offered)
	if err != nil {
		return nil, err
	}
	switch {
	case id.Generated:
		return nil, fmt.Errorf("%w: %s", ErrGeneratedIdentity, id.prefix())
	case id.HostNQN != hostNQN:
		return nil, fmt.Errorf("%w: %s, expected %s", ErrWrongHost, quote(id.HostNQN), quote(hostNQN))
	case id.SubsysNQN != subsysNQN:
		return nil, fmt.Errorf("%w: %s, expected %s", ErrWrongSubsystem, quote(id.SubsysNQN), quote(subsysNQN))
	case id.Hash != k.CipherHash():
		return nil, fmt.Errorf("%w: %s offers %v, the key (HH %02d, %d bytes) makes %v identities",
			ErrHashMismatch, id.prefix(), id.Hash, uint8(k.transform), len(k.key), k.CipherHash())
	}
	retained, err := k.RetainedPSK(hostNQN, d)
	if err != nil {
		return nil, err
	}
	defer clear(retained)
	if id.Version == 1 {
		if err := k.checkDigest(id, retained, d); err != nil {
			return nil, err
		}
	}
	return TLSPSK(retained, id, d)
}

// checkDigest compares id's digest with the one retained makes; on a
// mismatch it tries the other libnvme derivation, to tell a host that
// derives its retained PSK the other way from one that holds another key.
func (k *ConfiguredPSK) checkDigest(id Identity, retained []byte, d Derivation) error {
	want, err := PSKDigest(id.Hash, retained, id.HostNQN, id.SubsysNQN)
	if err != nil {
		return err
	}
	if hmac.Equal([]byte(want), []byte(id.Digest)) {
		return nil
	}
	other := DerivationCompat
	if d != DerivationRFC8446 {
		other = DerivationRFC8446
	}
	if k.transform != HashNone {
		if r, err := k.RetainedPSK(id.HostNQN, other); err == nil {
			alt, _ := PSKDigest(id.Hash, r, id.HostNQN, id.SubsysNQN)
			clear(r)
			if hmac.Equal([]byte(alt), []byte(id.Digest)) {
				return fmt.Errorf("%w: it is the digest of the %v derivation, which this host uses; configure that one for it",
					ErrDigestMismatch, other)
			}
		}
	}
	return fmt.Errorf("%w: the host holds a different key for %s", ErrDigestMismatch, quote(id.SubsysNQN))
}
