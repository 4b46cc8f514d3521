package tcp

import (
	"errors"
	"fmt"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/ktls"
	"github.com/nvmeof-tgt/nvmeof-tgt/tlspsk"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// The secure channel: on a port with TLS, the connection's goroutine
// looks at the host's first byte before its poller starts. A TLS record
// (a handshake, 0x16) starts the handshake (package ktls), with the
// identity's key from the target (Target.TLSPSK); once done, the kernel
// encrypts and decrypts the socket's records and the poller reads and
// writes it as any other. Anything else is an ICReq in clear, which a
// port that requires TLS refuses. Both are bounded by the pre-Connect
// deadline, as a silent host is.

// TLSAvailable reports whether this build serves TLS: the daemon refuses a
// port with TLS otherwise.
func TLSAvailable() bool { return ktls.Available() }

// secure runs the secure channel's part of the connection's start. It
// reports whether the connection goes on; if not, the log and a counter
// say why.
func (c *Conn) secure() bool {
	deadline := time.Now().Add(connectTimeout)
	first, err := peekFirst(c.fd, deadline, &c.stopping)
	if err != nil {
		if !c.stopping.Load() {
			c.log.WithError(err).Debug("the host sent nothing before the connection ended")
		}
		return false
	}
	if first != ktls.RecordHandshake {
		if c.srv.port.TLS == fabrics.TLSRequired {
			c.srv.stats.TLSRefused.Add(1)
			c.srv.warn(warnTLSRefused, c.log, "a host connected in clear to a port that requires TLS: closing the connection; connect with --tls and a TLS key")
			return false
		}
		return true
	}
	s, err := ktls.Server(c.fd, c.srv.target.TLSPSK, deadline)
	if err != nil {
		c.srv.stats.TLSFailures.Add(1)
		c.srv.warn(warnTLSFailed, c.log.WithError(err), "the TLS handshake failed: closing the connection")
		return false
	}
	id, err := tlspsk.ParseIdentity(s.Identity)
	if err != nil { // Target.TLSPSK parsed it already
		c.srv.stats.TLSFailures.Add(1)
		c.log.WithError(err).Error("the TLS identity no longer parses: closing the connection")
		return false
	}
	c.tlsHost, c.tlsSub, c.tls = id.HostNQN, id.SubsysNQN, true
	c.srv.stats.TLSHandshakes.Add(1)
	c.log = c.log.WithFields(logrus.Fields{"tls": s.Cipher})
	c.log.WithFields(logrus.Fields{"identity": s.Identity, "key_exchange": s.KeyExchange}).Info("TLS secure channel up")
	return true
}

// TLSIdentity implements fabrics.SecureChanneler.
func (c *Conn) TLSIdentity() (hostNQN, subNQN string, ok bool) {
	return c.tlsHost, c.tlsSub, c.tls
}

// peekFirst waits for the host's first byte and returns it, leaving it in
// the socket: until deadline, or until stop is set (the connection is
// closing).
func peekFirst(fd int, deadline time.Time, stop interface{ Load() bool }) (byte, error) {
	var b [1]byte
	for !stop.Load() {
		n, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK)
		switch {
		case err == nil && n == 1:
			return b[0], nil
		case err == nil:
			return 0, errEOF
		case err != unix.EAGAIN && err != unix.EINTR:
			return 0, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return 0, errors.New("no first byte within the connect timeout")
		}
		// At most 100 ms at a time, to see a stop.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		unix.Poll(fds, int(min(left, 100*time.Millisecond)/time.Millisecond)+1)
	}
	return 0, errors.New("the connection is closing")
}

// tlsRecordEnd explains a read that failed with EIO on a kernel TLS
// socket: the next record carries no data. It returns the error to
// close the connection with.
func (c *Conn) tlsRecordEnd() error {
	var buf [64]byte
	_, typ, err := ktls.ReadRecord(c.fd, buf[:])
	if err == nil {
		return fmt.Errorf("a TLS record of type %d where data was expected", typ)
	}
	return err
}
