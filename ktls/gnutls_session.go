//go:build cgo && !notls

package ktls

/*
#include <gnutls/gnutls.h>
#include <gnutls/socket.h>

static int ktls_enabled_by_gnutls(gnutls_session_t s) {
	int r = gnutls_transport_is_ktls_enabled(s);
	return r > 0 ? r : 0;
}
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// suites are the cipher suites the priorities allow, by GnuTLS's cipher.
var suites = map[C.gnutls_cipher_algorithm_t]cipherSuite{
	C.GNUTLS_CIPHER_AES_128_GCM:       aes128GCM,
	C.GNUTLS_CIPHER_AES_256_GCM:       aes256GCM,
	C.GNUTLS_CIPHER_CHACHA20_POLY1305: chacha20,
}

// takeKeys checks that the handshake left the kernel a clean start and
// takes the keys from GnuTLS.
func takeKeys(s C.gnutls_session_t, st *handshakeState) (*Session, *keyMaterial, error) {
	if n := C.gnutls_record_check_pending(s); n > 0 {
		return nil, nil, fmt.Errorf("%w: %d bytes", ErrPendingData, n)
	}
	if C.ktls_enabled_by_gnutls(s) != 0 {
		return nil, nil, fmt.Errorf("%w: GnuTLS set up kernel TLS itself (ktls in its system configuration), which must be off here", ErrHandshake)
	}
	if v := C.gnutls_protocol_get_version(s); v != C.GNUTLS_TLS1_3 {
		return nil, nil, fmt.Errorf("%w: it negotiated %s", ErrVersion, C.GoString(C.gnutls_protocol_get_name(v)))
	}
	if st.pskSize == 0 {
		return nil, nil, fmt.Errorf("%w: it ended without a PSK", ErrHandshake)
	}
	c := C.gnutls_cipher_get(s)
	suite, ok := suites[c]
	if !ok {
		return nil, nil, fmt.Errorf("%w: it negotiated %s", ErrCipher, C.GoString(C.gnutls_cipher_get_name(c)))
	}
	if suite.hashSize != st.pskSize {
		return nil, nil, fmt.Errorf("%w: identity %q: a %d-byte PSK with %s, whose PSKs are %d bytes",
			ErrUnsupportedPSK, st.identity, st.pskSize, suite.name, suite.hashSize)
	}
	k := &keyMaterial{suite: suite}
	var err error
	if k.rx, err = trafficState(s, 1, suite); err == nil {
		k.tx, err = trafficState(s, 0, suite)
	}
	if err != nil {
		k.clear()
		return nil, nil, err
	}
	return &Session{
		Identity:    st.identity,
		Version:     "TLS1.3",
		Cipher:      suite.name,
		KeyExchange: C.GoString(C.gnutls_kx_get_name(C.gnutls_kx_get(s))),
	}, k, nil
}

// trafficState is one direction's keys: read 1 for the host's records,
// 0 for ours.
func trafficState(s C.gnutls_session_t, read C.uint, suite cipherSuite) (trafficKeys, error) {
	var mac, iv, key C.gnutls_datum_t
	var seq [8]byte
	if rc := C.gnutls_record_get_state(s, read, &mac, &iv, &key, (*C.uchar)(&seq[0])); rc < 0 {
		return trafficKeys{}, gnutlsError(ErrHandshake, "the traffic keys", rc)
	}
	k := trafficKeys{
		key: C.GoBytes(unsafe.Pointer(key.data), C.int(key.size)),
		iv:  C.GoBytes(unsafe.Pointer(iv.data), C.int(iv.size)),
		seq: binary.BigEndian.Uint64(seq[:]),
	}
	if len(k.key) != suite.keySize || len(k.iv) != tlsIVSize {
		clear(k.key)
		return trafficKeys{}, fmt.Errorf("%w: GnuTLS gave a %d-byte key and a %d-byte IV for %s",
			ErrHandshake, len(k.key), len(k.iv), suite.name)
	}
	return k, nil
}

// handshakeError names why the handshake failed: what the ClientHello
// offered and what the PSK callback saw tell apart the GnuTLS errors that
// could mean several things.
func handshakeError(s C.gnutls_session_t, st *handshakeState, rc C.int) error {
	switch {
	case st.refused != nil:
		return st.refused
	case rc == C.GNUTLS_E_FATAL_ALERT_RECEIVED:
		return fmt.Errorf("%w, in the handshake", &AlertError{Level: 2, Description: byte(C.gnutls_alert_get(s))})
	case rc == C.GNUTLS_E_PREMATURE_TERMINATION, rc == C.GNUTLS_E_PULL_ERROR, rc == C.GNUTLS_E_PUSH_ERROR,
		rc == C.GNUTLS_E_UNEXPECTED_PACKET_LENGTH && peerClosed(st.fd):
		return gnutlsError(ErrPeerClosed, "", rc)
	case st.sawHello && !st.called && !st.hello.tls13:
		return gnutlsError(ErrVersion, "its ClientHello offers TLS 1.2 or older", rc)
	case st.sawHello && !st.called && !st.hello.psk:
		return gnutlsError(ErrNoPSK, "", rc)
	case rc == C.GNUTLS_E_UNSUPPORTED_VERSION_PACKET:
		return gnutlsError(ErrVersion, "", rc)
	case rc == C.GNUTLS_E_RECEIVED_ILLEGAL_PARAMETER && st.pskSize > 0:
		return gnutlsError(ErrBadKey, fmt.Sprintf("identity %q: the host holds another key for it, or binds it to another hash", st.identity), rc)
	case rc == C.GNUTLS_E_NO_CIPHER_SUITES && st.pskSize > 0:
		return gnutlsError(ErrCipher, fmt.Sprintf("for a %d-byte PSK, whose hash the suite's must be", st.pskSize), rc)
	}
	return gnutlsError(ErrHandshake, "", rc)
}

// peerClosed reports whether the host has closed its end: GnuTLS fails a
// record cut short by the end of the stream as one of a wrong length.
func peerClosed(fd int) bool {
	var b [1]byte
	n, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return n == 0 && err == nil || errors.Is(err, unix.ECONNRESET)
}

// sendAlert tells the host why, unless it told us first or is gone. A
// refused identity is unknown_psk_identity, which tlshd reports to the
// host's kernel as a rejected key; a bad binder is decrypt_error (RFC 8446
// §6.2).
func sendAlert(s C.gnutls_session_t, err error, rc C.int) {
	alert := C.gnutls_alert_description_t(C.GNUTLS_A_HANDSHAKE_FAILURE)
	switch {
	case errors.Is(err, ErrAlert), errors.Is(err, ErrPeerClosed):
		return
	case errors.Is(err, ErrIdentityRefused):
		alert = C.GNUTLS_A_UNKNOWN_PSK_IDENTITY
	case errors.Is(err, ErrBadKey):
		alert = C.GNUTLS_A_DECRYPT_ERROR
	case errors.Is(err, ErrVersion):
		alert = C.GNUTLS_A_PROTOCOL_VERSION
	case errors.Is(err, ErrNoPSK), errors.Is(err, ErrUnsupportedPSK), errors.Is(err, ErrCipher):
	default:
		C.gnutls_alert_send_appropriate(s, rc)
		return
	}
	C.gnutls_alert_send(s, C.GNUTLS_AL_FATAL, alert)
}

// gnutlsError wraps sentinel with our words and GnuTLS's.
func gnutlsError(sentinel error, what string, rc C.int) error {
	msg := C.GoString(C.gnutls_strerror(rc))
	if what == "" {
		return fmt.Errorf("%w (GnuTLS: %s, %d)", sentinel, msg, int(rc))
	}
	return fmt.Errorf("%w: %s (GnuTLS: %s, %d)", sentinel, what, msg, int(rc))
}
