package ktls

import (
	"errors"
	"fmt"
	"os"
)

// Why a handshake, the kernel TLS set-up or a read failed. Every error
// this package returns for a connection wraps one of these and says more,
// so that a caller can count them.
var (
	ErrNoGnuTLS = errors.New("this build has no TLS (built without GnuTLS: -tags notls, or without cgo)")
	ErrNoKTLS   = errors.New("the kernel has no TLS (the tls module is not loaded: modprobe tls)")

	ErrTimeout         = fmt.Errorf("the TLS handshake did not finish in time: %w", os.ErrDeadlineExceeded)
	ErrPeerClosed      = errors.New("the host closed the connection during the TLS handshake")
	ErrNotTLS          = errors.New("the host did not start a TLS handshake")
	ErrVersion         = errors.New("the host does not offer TLS 1.3")
	ErrNoPSK           = errors.New("the host offers no PSK (a ClientHello for certificates only)")
	ErrIdentityRefused = errors.New("the host's PSK identity is refused")
	ErrUnsupportedPSK  = errors.New("the PSK cannot be used")
	ErrBadKey          = errors.New("the host's PSK is not the one that goes with its identity (bad binder)")
	ErrCipher          = errors.New("no cipher suite in common that kernel TLS can run")
	ErrPendingData     = errors.New("the host sent data that GnuTLS read before kernel TLS was set up")
	ErrHandshake       = errors.New("the TLS handshake failed")

	ErrAlert            = errors.New("the host sent a TLS alert")
	ErrKeyUpdate        = errors.New("the host sent a TLS KeyUpdate, and the kernel is not given new keys")
	ErrBadRecord        = errors.New("a TLS record failed to decrypt")
	ErrUnexpectedRecord = errors.New("the host sent a TLS record that has no place after the handshake")
)

// AlertError is an alert the host sent, in the handshake or after it
// (but close_notify, which reads as io.EOF). It wraps ErrAlert.
type AlertError struct {
	Level       byte // 1 warning, 2 fatal; TLS 1.3 makes every alert but close_notify and user_canceled fatal
	Description byte // RFC 8446 §6 AlertDescription
}

func (e *AlertError) Error() string {
	return fmt.Sprintf("the host sent TLS alert %s (%d)", AlertName(e.Description), e.Description)
}

func (e *AlertError) Unwrap() error { return ErrAlert }

// alertNames are RFC 8446's AlertDescription values, by the names the
// RFC and the hosts' logs give them.
var alertNames = map[byte]string{
	0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac",
	22: "record_overflow", 40: "handshake_failure", 42: "bad_certificate",
	43: "unsupported_certificate", 44: "certificate_revoked",
	45: "certificate_expired", 46: "certificate_unknown",
	47: "illegal_parameter", 48: "unknown_ca", 49: "access_denied",
	50: "decode_error", 51: "decrypt_error", 70: "protocol_version",
	71: "insufficient_security", 80: "internal_error",
	86: "inappropriate_fallback", 90: "user_canceled",
	109: "missing_extension", 110: "unsupported_extension",
	112: "unrecognized_name", 113: "bad_certificate_status_response",
	115: "unknown_psk_identity", 116: "certificate_required",
	120: "no_application_protocol",
}

// AlertName is the RFC 8446 name of an alert description.
func AlertName(d byte) string {
	if n, ok := alertNames[d]; ok {
		return n
	}
	return "unknown"
}
