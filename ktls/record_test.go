package ktls

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestControlRecord checks what ends the connection at each record that
// is not data.
func TestControlRecord(t *testing.T) {
	for _, tc := range []struct {
		typ     byte
		content []byte
		want    error
		words   string
	}{
		{RecordAlert, []byte{1, 0}, io.EOF, ""},
		{RecordAlert, []byte{2, 0}, io.EOF, ""},
		{RecordAlert, []byte{2, 20}, ErrAlert, "bad_record_mac (20)"},
		{RecordAlert, []byte{2, 200}, ErrAlert, "unknown (200)"},
		{RecordAlert, []byte{2}, ErrUnexpectedRecord, "1 bytes"},
		{RecordAlert, []byte{2, 0, 0}, ErrUnexpectedRecord, "3 bytes"},
		{RecordHandshake, []byte{keyUpdate, 0, 0, 1, 0}, ErrKeyUpdate, ""},
		{RecordHandshake, []byte{4, 0, 0, 0}, ErrUnexpectedRecord, "handshake message type 4"},
		{RecordHandshake, nil, ErrUnexpectedRecord, "content type 22"},
		{RecordChangeCipherSpec, []byte{1}, ErrUnexpectedRecord, "content type 20"},
	} {
		err := controlRecord(tc.typ, tc.content)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.words) {
			t.Errorf("record type %d % x: %v, want %v saying %q", tc.typ, tc.content, err, tc.want, tc.words)
		}
	}
	var ae *AlertError
	if err := controlRecord(RecordAlert, []byte{2, 115}); !errors.As(err, &ae) || ae.Level != 2 || ae.Description != 115 {
		t.Errorf("alert 115: %v, want an *AlertError of level 2, description 115", err)
	}
}

// recordTypeCmsg is the control message the kernel sends with a record.
func recordTypeCmsg(level, typ int32, recordType byte) []byte {
	b := make([]byte, unix.CmsgSpace(1))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(1))
	b[unix.CmsgLen(0)] = recordType
	return b
}

func lengthPastEnd(b []byte) []byte {
	(*unix.Cmsghdr)(unsafe.Pointer(&b[0])).SetLen(len(b) + 1)
	return b
}

func TestCmsgRecordType(t *testing.T) {
	for _, tc := range []struct {
		name string
		oob  []byte
		want byte
	}{
		{"none", nil, RecordApplicationData},
		{"alert", recordTypeCmsg(unix.SOL_TLS, tlsGetRecordType, RecordAlert), RecordAlert},
		{"data", recordTypeCmsg(unix.SOL_TLS, tlsGetRecordType, RecordApplicationData), RecordApplicationData},
		{"another level's", recordTypeCmsg(unix.SOL_SOCKET, tlsGetRecordType, RecordAlert), RecordApplicationData},
		{"after another", append(recordTypeCmsg(unix.SOL_SOCKET, 1, 9), recordTypeCmsg(unix.SOL_TLS, tlsGetRecordType, RecordHandshake)...), RecordHandshake},
		{"cut short", recordTypeCmsg(unix.SOL_TLS, tlsGetRecordType, RecordAlert)[:unix.CmsgLen(0)], RecordApplicationData},
		{"a length past the end", lengthPastEnd(recordTypeCmsg(unix.SOL_TLS, tlsGetRecordType, RecordAlert)), RecordApplicationData},
	} {
		if got := cmsgRecordType(tc.oob); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestReadRecordPlainSocket reads a socket without kernel TLS, where
// every byte is data and the end of the stream is io.EOF.
func TestReadRecordPlainSocket(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	unix.Write(fds[1], []byte("data"))
	unix.Close(fds[1])
	p := make([]byte, 16)
	if n, typ, err := ReadRecord(fds[0], p); err != nil || typ != RecordApplicationData || string(p[:n]) != "data" {
		t.Fatalf("ReadRecord: %q, type %d, %v", p[:n], typ, err)
	}
	if n, typ, err := ReadRecord(fds[0], p); n != 0 || typ != 0 || err != io.EOF {
		t.Fatalf("ReadRecord at the end: %d, type %d, %v; want 0, 0, io.EOF", n, typ, err)
	}
	if _, _, err := ReadRecord(fds[0], p[:1]); err == nil {
		t.Error("ReadRecord into a byte, too small for an alert")
	}
}

// TestReadRecordAllocates checks the data path's read allocates nothing.
func TestReadRecordAllocates(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	p, data := make([]byte, 16), []byte("data")
	allocs := testing.AllocsPerRun(100, func() {
		unix.Write(fds[1], data)
		if n, _, err := ReadRecord(fds[0], p); n != 4 || err != nil {
			t.Fatalf("ReadRecord: %d, %v", n, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations a read", allocs)
	}
}

func TestRecvError(t *testing.T) {
	for _, tc := range []struct {
		errno unix.Errno
		want  error
	}{
		{unix.EAGAIN, unix.EAGAIN},
		{unix.EINTR, unix.EINTR},
		{unix.EBADMSG, ErrBadRecord},
		{unix.EMSGSIZE, ErrBadRecord},
		{unix.EKEYEXPIRED, ErrKeyUpdate},
		{unix.EIO, unix.EIO},
	} {
		if err := recvError(tc.errno); !errors.Is(err, tc.want) || !errors.Is(err, tc.errno) {
			t.Errorf("%v: %v, want %v", tc.errno, err, tc.want)
		}
	}
	if err := recvError(unix.EAGAIN); err != unix.EAGAIN {
		t.Errorf("EAGAIN comes back as %#v, not as it is", err)
	}
}

func TestFirstByte(t *testing.T) {
	for _, tc := range []struct {
		b     byte
		want  error
		words string
	}{
		{0x16, nil, ""},
		{0x00, ErrNotTLS, "ICReq"},
		{0x80, ErrVersion, "SSL 2"},
		{'G', ErrNotTLS, "0x47"},
	} {
		err := firstByte(tc.b)
		if !errors.Is(err, tc.want) || err != nil && !strings.Contains(err.Error(), tc.words) {
			t.Errorf("0x%02x: %v, want %v saying %q", tc.b, err, tc.want, tc.words)
		}
	}
}

func TestUsablePSK(t *testing.T) {
	for _, tc := range []struct {
		size   int
		sha384 bool
		ok     bool
	}{
		{32, false, true}, {32, true, true},
		{48, true, true}, {48, false, false},
		{16, true, false}, {64, true, false}, {0, true, false},
	} {
		err := usablePSK(tc.size, tc.sha384)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrUnsupportedPSK) {
			t.Errorf("%d bytes, SHA-384 %v: %v", tc.size, tc.sha384, err)
		}
	}
}

// TestErrTimeoutIsADeadline lets a caller treat a handshake's timeout as
// any other deadline.
func TestErrTimeoutIsADeadline(t *testing.T) {
	if !errors.Is(ErrTimeout, os.ErrDeadlineExceeded) {
		t.Error("ErrTimeout is not os.ErrDeadlineExceeded")
	}
}
