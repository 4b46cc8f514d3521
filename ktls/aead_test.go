package ktls

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitLong bounds what a test waits for from its peer.
const waitLong = 10 * time.Second

// testPSK is a PSK of n bytes that no two tests' share.
func testPSK(n int, seed byte) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = seed + byte(i)
	}
	return k
}

// readFull reads n bytes from fd, or fails the test after waitLong.
func readFull(t *testing.T, fd, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	for got := 0; got < n; {
		if err := waitFD(fd, unix.POLLIN, time.Now().Add(waitLong)); err != nil {
			t.Fatalf("read %d of %d bytes: %v", got, n, err)
		}
		m, err := unix.Read(fd, b[got:])
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || m == 0 {
			t.Fatalf("read %d of %d bytes: %d, %v", got, n, m, err)
		}
		got += m
	}
	return b
}

// recordAEAD is one direction of TLS 1.3 record protection, done by
// hand: with it the tests check the keys that would go to the kernel
// against what the client encrypts and decrypts.
type recordAEAD struct {
	aead cipher.AEAD
	keys *trafficKeys
}

func newRecordAEAD(t *testing.T, k *trafficKeys) *recordAEAD {
	t.Helper()
	block, err := aes.NewCipher(k.key)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return &recordAEAD{aead: aead, keys: k}
}

// nonce is RFC 8446 §5.3's: the IV with the sequence number XORed into
// its end; each record takes the next number.
func (r *recordAEAD) nonce() []byte {
	n := bytes.Clone(r.keys.iv)
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], r.keys.seq)
	for i := range seq {
		n[len(n)-8+i] ^= seq[i]
	}
	r.keys.seq++
	return n
}

// readRecord reads one record from fd and opens it: its inner content
// type and content, padding taken off.
func (r *recordAEAD) readRecord(t *testing.T, fd int) (byte, []byte) {
	t.Helper()
	hdr := readFull(t, fd, 5)
	if hdr[0] != RecordApplicationData || hdr[1] != 3 || hdr[2] != 3 {
		t.Fatalf("record header % x: not a TLS 1.3 protected record", hdr)
	}
	body := readFull(t, fd, int(binary.BigEndian.Uint16(hdr[3:])))
	inner, err := r.aead.Open(nil, r.nonce(), body, hdr)
	if err != nil {
		t.Fatalf("the exported key does not open the host's record: %v", err)
	}
	inner = bytes.TrimRight(inner, "\x00")
	if len(inner) == 0 {
		t.Fatal("a record of padding alone")
	}
	return inner[len(inner)-1], inner[:len(inner)-1]
}

// writeRecord seals content as one record of type typ and writes it.
func (r *recordAEAD) writeRecord(t *testing.T, fd int, typ byte, content []byte) {
	t.Helper()
	inner := append(bytes.Clone(content), typ)
	hdr := []byte{RecordApplicationData, 3, 3, 0, 0}
	binary.BigEndian.PutUint16(hdr[3:], uint16(len(inner)+r.aead.Overhead()))
	rec := append(hdr, r.aead.Seal(nil, r.nonce(), inner, hdr)...)
	if n, err := unix.Write(fd, rec); err != nil || n != len(rec) {
		t.Fatalf("write a %d-byte record: %d, %v", len(rec), n, err)
	}
}

// needKTLS ends a test that needs kernel TLS on a kernel without it: it
// fails where NVMEOF_REQUIRE_KTLS asks for kernel TLS (the VM tests set
// it, with the tls module loaded), and says NOT RUN elsewhere.
func needKTLS(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrNoKTLS) {
		t.Fatalf("%v, want ErrNoKTLS", err)
	}
	if os.Getenv("NVMEOF_REQUIRE_KTLS") != "" {
		t.Fatalf("NVMEOF_REQUIRE_KTLS is set: %v", err)
	}
	t.Skipf("NOT RUN: %v (NVMEOF_REQUIRE_KTLS=1 runs it where the tls module is loaded)", err)
}

// tcpPair is a connected loopback TCP pair's two sockets, out of the Go
// runtime's hands.
func tcpPair(t *testing.T) (a, b int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer dialed.Close()
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()
	return socketOf(t, accepted), socketOf(t, dialed)
}

// socketOf is a descriptor of conn's socket of its own, closed when the
// test ends.
func socketOf(t *testing.T, conn net.Conn) int {
	t.Helper()
	f, err := conn.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}
