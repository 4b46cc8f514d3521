package ktls

import (
	"errors"
	"fmt"
	"io"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TLS record content types (RFC 8446 §5.1).
const (
	RecordChangeCipherSpec byte = 20
	RecordAlert            byte = 21
	RecordHandshake        byte = 22
	RecordApplicationData  byte = 23
)

// keyUpdate is the KeyUpdate handshake message type (RFC 8446 §4).
const keyUpdate = 24

// ReadRecord reads from a socket with kernel TLS receiving, as read(2)
// would, but for the records that carry no data, which read(2) fails with
// EIO: the kernel hands them over one at a time with their type in a
// control message. Data comes back with RecordApplicationData and no
// error; a socket without kernel TLS reads as all data. The end of the
// host's data is io.EOF, whether it sent close_notify (recordType
// RecordAlert) or closed TCP alone (recordType 0). Any other alert is an
// *AlertError, a KeyUpdate is ErrKeyUpdate: the kernel is given no new
// keys, so the connection cannot go on past it. Errors the caller polls
// on, EAGAIN and EINTR, come back as they are. p must hold at least the
// two bytes of an alert.
func ReadRecord(fd int, p []byte) (n int, recordType byte, err error) {
	if len(p) < 2 {
		return 0, 0, fmt.Errorf("ktls: ReadRecord into %d bytes, fewer than an alert's 2", len(p))
	}
	// recvmsg by hand, with everything on the stack: unix.Recvmsg costs
	// the data path two allocations a read.
	var oob [8]uint64 // aligned for a cmsghdr
	iov := unix.Iovec{Base: &p[0]}
	iov.SetLen(len(p))
	msg := unix.Msghdr{Iov: &iov, Control: (*byte)(unsafe.Pointer(&oob[0]))}
	msg.SetIovlen(1)
	msg.SetControllen(int(unsafe.Sizeof(oob)))
	r, _, errno := unix.Syscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), 0)
	if errno != 0 {
		return 0, 0, recvError(errno)
	}
	n = int(r)
	recordType = cmsgRecordType(unsafe.Slice((*byte)(unsafe.Pointer(&oob[0])), msg.Controllen))
	if n == 0 && recordType != RecordAlert {
		return 0, 0, io.EOF
	}
	if recordType == RecordApplicationData {
		return n, recordType, nil
	}
	return n, recordType, controlRecord(recordType, p[:n])
}

// cmsgRecordType is the record type in TLS_GET_RECORD_TYPE, or
// application data where the kernel sent none.
func cmsgRecordType(oob []byte) byte {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			break
		}
		if h.Level == unix.SOL_TLS && h.Type == tlsGetRecordType && l > unix.CmsgLen(0) {
			return oob[unix.CmsgLen(0)]
		}
		oob = oob[min(unix.CmsgSpace(l-unix.CmsgLen(0)), len(oob)):]
	}
	return RecordApplicationData
}

// recvError names what the kernel's TLS receive errors mean for the
// connection.
func recvError(err error) error {
	switch {
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
		return err
	case errors.Is(err, unix.EBADMSG):
		return fmt.Errorf("%w: the record's tag does not match (altered on the way, or keys out of step): %w", ErrBadRecord, err)
	case errors.Is(err, unix.EMSGSIZE):
		return fmt.Errorf("%w: the record is longer than TLS allows: %w", ErrBadRecord, err)
	case errors.Is(err, unix.EKEYEXPIRED):
		return fmt.Errorf("%w: the kernel holds the records after it: %w", ErrKeyUpdate, err)
	}
	return fmt.Errorf("ktls: recvmsg: %w", err)
}

// controlRecord is the error that ends the connection at a record that
// is not data.
func controlRecord(recordType byte, b []byte) error {
	switch recordType {
	case RecordAlert:
		switch {
		case len(b) != 2:
			return fmt.Errorf("%w: an alert of %d bytes", ErrUnexpectedRecord, len(b))
		case b[1] == 0:
			return io.EOF
		}
		return &AlertError{Level: b[0], Description: b[1]}
	case RecordHandshake:
		if len(b) > 0 && b[0] == keyUpdate {
			return ErrKeyUpdate
		}
		if len(b) > 0 {
			return fmt.Errorf("%w: handshake message type %d", ErrUnexpectedRecord, b[0])
		}
	}
	return fmt.Errorf("%w: content type %d", ErrUnexpectedRecord, recordType)
}
