package tlspsk

import (
	"crypto/hmac"
	"errors"
	"fmt"
)

// Secure channel concatenation (TP 8018) runs DH-HMAC-CHAP on the admin
// queue of a connection without TLS, then has host and controller derive
// a PSK from what the authentication established, and reconnect with TLS
// on it. These are Linux's steps (nvme_auth_generate_psk,
// nvme_auth_generate_digest, nvme_auth_derive_tls_psk), taken by its host
// and its target alike; the identity and TLS PSK come from
// GeneratedIdentity and TLSPSK.

// GeneratedPSK is the generated PSK (NVMe Base 2.0 §8.13.5.9), HMAC(KS,
// C1 || C2) with the hash DH-HMAC-CHAP negotiated: KS is the session key, the Diffie-Hellman
// shared secret as dhchap.Group.SharedSecret returns it (Linux keys the
// HMAC with it as it is, not hashed as for the augmented challenge), and
// C1 and C2 the host's and the controller's challenges. Linux computes it
// for SHA-512 too but derives nothing from it; neither does this package.
func GeneratedPSK(h Hash, sessionKey, c1, c2 []byte) ([]byte, error) {
	if h.Size() == 0 {
		return nil, fmt.Errorf("tlspsk: secure channel concatenation needs SHA-256 or SHA-384, not %v", h)
	}
	if len(c1) != h.Size() || len(c2) != h.Size() {
		return nil, fmt.Errorf("tlspsk: %v challenges are %d bytes, not %d and %d", h, h.Size(), len(c1), len(c2))
	}
	if len(sessionKey) == 0 {
		return nil, errors.New("tlspsk: secure channel concatenation needs a session key: a DH group other than NULL")
	}
	m := hmac.New(h.hashFunc(), sessionKey)
	m.Write(c1)
	m.Write(c2)
	return m.Sum(nil), nil
}

// GeneratedIdentity is the identity Linux files a generated PSK under,
// "NVMe1G<hh> <host NQN> <subsystem NQN> <digest>", the digest made with
// the generated PSK. Its TLS PSK is TLSPSK(generated, identity,
// DerivationRFC8446), or DerivationLinux614 for a Linux 6.14 to 6.17
// host.
func GeneratedIdentity(h Hash, generated []byte, hostNQN, subsysNQN string) (Identity, error) {
	digest, err := PSKDigest(h, generated, hostNQN, subsysNQN)
	if err != nil {
		return Identity{}, err
	}
	id := Identity{Version: 1, Generated: true, Hash: h, HostNQN: hostNQN, SubsysNQN: subsysNQN, Digest: digest}
	return id, id.Validate()
}
