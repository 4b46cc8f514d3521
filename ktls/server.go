package ktls

import (
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/sys/unix"
)

// Session is what the handshake settled.
type Session struct {
	Identity    string // the PSK identity the host offered and lookup accepted
	Version     string // "TLS1.3"
	Cipher      string // the cipher suite, as "TLS_AES_128_GCM_SHA256"
	KeyExchange string // "PSK", or "ECDHE-PSK" / "DHE-PSK", which add forward secrecy
}

// Server runs the controller's side of the TLS 1.3 PSK handshake on fd,
// a connected TCP socket the caller keeps, and then hands both directions
// to the kernel: from then on, writes to fd are encrypted and reads from
// it decrypted (see ReadRecord). lookup gets the identity the host
// offered and returns its TLS PSK, 32 or 48 bytes, or an error that says
// why it is refused; a refused host gets the unknown_psk_identity alert.
// The PSK is wiped once GnuTLS has its copy, so lookup returns a slice of
// its own, as tlspsk.ServerPSK does.
// The handshake blocks the calling goroutine, until deadline if it is
// not zero; fd may be blocking or not, and is left as it was.
//
// On an error the socket may hold part of a handshake or be half set up
// for kernel TLS, and is fit only for closing. The error wraps one of
// the package's sentinels, ErrBadKey for a host that holds another key
// for its identity, ErrNoKTLS for a kernel without TLS, and so on.
func Server(fd int, lookup func(identity string) ([]byte, error), deadline time.Time) (*Session, error) {
	s, keys, err := negotiate(fd, lookup, deadline)
	defer keys.clear()
	if err != nil {
		return nil, err
	}
	if err := installKTLS(fd, keys); err != nil {
		return nil, err
	}
	return s, nil
}

// negotiate is Server up to the kernel: the handshake, and the keys it
// left for the kernel to go on with.
func negotiate(fd int, lookup func(string) ([]byte, error), deadline time.Time) (*Session, *keyMaterial, error) {
	if !Available() {
		return nil, nil, ErrNoGnuTLS
	}
	restore, err := setNonblock(fd)
	if err != nil {
		return nil, nil, err
	}
	defer restore()
	if err := awaitClientHello(fd, deadline); err != nil {
		return nil, nil, err
	}
	return handshake(fd, lookup, deadline)
}

// setNonblock makes fd non-blocking, so that the handshake can wait for
// it with poll and a deadline, and returns what puts it back.
func setNonblock(fd int) (restore func(), err error) {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return nil, fmt.Errorf("ktls: fcntl F_GETFL: %w", err)
	}
	if flags&unix.O_NONBLOCK != 0 {
		return func() {}, nil
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("ktls: set O_NONBLOCK: %w", err)
	}
	return func() { unix.SetNonblock(fd, false) }, nil
}

// awaitClientHello waits for the host's first byte and checks that it
// starts a TLS handshake record, so that a host that speaks plain NVMe/TCP
// to a port that requires TLS, or something else altogether, is told
// apart from a failed handshake.
func awaitClientHello(fd int, deadline time.Time) error {
	var b [1]byte
	for {
		n, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK)
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			if err := waitFD(fd, unix.POLLIN, deadline); err != nil {
				return fmt.Errorf("%w, waiting for the ClientHello", err)
			}
			continue
		case err != nil:
			return fmt.Errorf("%w: before its ClientHello: %w", ErrPeerClosed, err)
		case n == 0:
			return fmt.Errorf("%w: before its ClientHello", ErrPeerClosed)
		}
		return firstByte(b[0])
	}
}

// firstByte checks the first byte the host sent: a TLS handshake record's
// content type.
func firstByte(b byte) error {
	switch b {
	case RecordHandshake:
		return nil
	case 0x00: // ICReq's PDU type
		return fmt.Errorf("%w: it sent an NVMe/TCP ICReq, as a host does that does not use TLS", ErrNotTLS)
	case 0x80: // the length's high bit of an SSL 2 compatible ClientHello
		return fmt.Errorf("%w: it sent an SSL 2 compatible ClientHello", ErrVersion)
	}
	return fmt.Errorf("%w: its first byte is 0x%02x, where a TLS handshake record starts with 0x16", ErrNotTLS, b)
}

// waitFD polls fd for events until deadline; a zero deadline is none.
func waitFD(fd int, events int16, deadline time.Time) error {
	for {
		ms := -1
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return ErrTimeout
			}
			ms = int(min((d+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: events}}
		n, err := unix.Poll(fds, ms)
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return fmt.Errorf("ktls: poll: %w", err)
		case n > 0:
			return nil // readiness or an error on the socket: the next call says which
		}
	}
}

// usablePSK checks a TLS PSK's size, which is its hash's: SHA-256 or,
// where GnuTLS can bind a PSK to it, SHA-384.
func usablePSK(n int, sha384 bool) error {
	switch {
	case n == 32, n == 48 && sha384:
		return nil
	case n == 48:
		return fmt.Errorf("%w: a 48-byte (SHA-384) PSK needs GnuTLS 3.8.11 or later; the GnuTLS of this build binds every PSK to SHA-256", ErrUnsupportedPSK)
	}
	return fmt.Errorf("%w: a TLS PSK is 32 bytes (SHA-256) or 48 (SHA-384), not %d", ErrUnsupportedPSK, n)
}
