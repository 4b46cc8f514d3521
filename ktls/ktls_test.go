package ktls

import (
	"bytes"
	"crypto/cipher"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testKeys are keys for suite that no two directions share, with record
// sequence numbers past 0 so that a misplaced rec_seq shows.
func testKeys(s cipherSuite) *keyMaterial {
	return &keyMaterial{
		suite: s,
		rx:    trafficKeys{key: testPSK(s.keySize, 0x10), iv: testPSK(tlsIVSize, 0x40), seq: 5},
		tx:    trafficKeys{key: testPSK(s.keySize, 0x80), iv: testPSK(tlsIVSize, 0xc0), seq: 0x0102},
	}
}

// TestCryptoInfoLayout pins each crypto_info to linux/tls.h: struct
// tls12_crypto_info_aes_gcm_128 is 40 bytes, _aes_gcm_256 and
// _chacha20_poly1305 56, and the fields run version, cipher type, IV
// (past the salt), key, salt, record sequence number.
func TestCryptoInfoLayout(t *testing.T) {
	for _, tc := range []struct {
		suite cipherSuite
		want  string // hex, on a little-endian machine
	}{
		{aes128GCM, "0403" + "3300" + "4445464748494a4b" + "101112131415161718191a1b1c1d1e1f" + "40414243" + "0000000000000005"},
		{aes256GCM, "0403" + "3400" + "4445464748494a4b" + "101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f" + "40414243" + "0000000000000005"},
		{chacha20, "0403" + "3600" + "404142434445464748494a4b" + "101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f" + "0000000000000005"},
	} {
		got, err := tc.suite.cryptoInfo(testKeys(tc.suite).rx)
		if err != nil {
			t.Fatal(err)
		}
		if h := hex.EncodeToString(got); h != tc.want {
			t.Errorf("%s: crypto_info\n%s, want\n%s", tc.suite.name, h, tc.want)
		}
	}
	short := testKeys(aes256GCM).rx
	short.key = short.key[:16]
	if _, err := aes256GCM.cryptoInfo(short); err == nil {
		t.Error("a 16-byte key for AES-256-GCM laid out")
	}
}

// TestKernelTLS hands one end of a loopback connection to the kernel
// and keeps the other in Go, which seals and opens records with the same
// keys by hand: the kernel's records open, and records sealed by hand
// read back through ReadRecord, data, alerts and a KeyUpdate alike. A
// kernel without TLS fails the set-up with ErrNoKTLS, and the rest is
// left to a machine with the tls module (NVMEOF_REQUIRE_KTLS=1).
func TestKernelTLS(t *testing.T) {
	a, _ := tcpPair(t)
	if err := installKTLS(a, testKeys(aes128GCM)); err != nil {
		needKTLS(t, err)
	}
	for _, suite := range []cipherSuite{aes128GCM, aes256GCM, chacha20} {
		t.Run(suite.name+"/kernel to kernel", func(t *testing.T) { kernelToKernel(t, suite) })
	}
	// The standard library has no ChaCha20-Poly1305 to check the kernel's
	// records with.
	for _, suite := range []cipherSuite{aes128GCM, aes256GCM} {
		t.Run(suite.name, func(t *testing.T) {
			t.Run("data", func(t *testing.T) { kernelData(t, suite) })
			for _, tc := range []struct {
				name    string
				typ     byte
				content []byte
				want    error
			}{
				{"close_notify", RecordAlert, []byte{1, 0}, io.EOF},
				{"fatal alert", RecordAlert, []byte{2, 20}, ErrAlert},
				{"KeyUpdate", RecordHandshake, []byte{keyUpdate, 0, 0, 1, 1}, ErrKeyUpdate},
				{"change_cipher_spec", RecordChangeCipherSpec, []byte{1}, ErrUnexpectedRecord},
			} {
				t.Run(tc.name, func(t *testing.T) { kernelRecord(t, suite, tc.typ, tc.content, tc.want) })
			}
			t.Run("tampered", func(t *testing.T) { kernelTampered(t, suite) })
		})
	}
}

// kernelPair is a loopback connection with kernel TLS on k's end and
// Go's hand-made records on the other.
func kernelPair(t *testing.T, suite cipherSuite) (kernel, plain int, toKernel, fromKernel *recordAEAD) {
	t.Helper()
	kernel, plain = tcpPair(t)
	k := testKeys(suite)
	if err := installKTLS(kernel, k); err != nil {
		t.Fatal(err)
	}
	return kernel, plain, newRecordAEAD(t, &k.rx), newRecordAEAD(t, &k.tx)
}

// kernelToKernel runs kernel TLS on both ends, with the keys crossed.
func kernelToKernel(t *testing.T, suite cipherSuite) {
	a, b := tcpPair(t)
	k := testKeys(suite)
	crossed := &keyMaterial{suite: suite, rx: k.tx, tx: k.rx}
	if err := installKTLS(a, k); err != nil {
		t.Fatal(err)
	}
	if err := installKTLS(b, crossed); err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("0123456789abcdef"), 2048) // two records' worth
	go unix.Write(a, msg)
	var got []byte
	buf := make([]byte, 8192)
	for len(got) < len(msg) {
		n, typ, err := readRecordWithin(t, b, buf)
		if err != nil || typ != RecordApplicationData {
			t.Fatalf("ReadRecord after %d bytes: type %d, %v", len(got), typ, err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("read %d bytes that are not the %d sent", len(got), len(msg))
	}
}

func kernelData(t *testing.T, suite cipherSuite) {
	kernel, plain, toKernel, fromKernel := kernelPair(t, suite)
	if _, err := unix.Write(kernel, []byte("from the kernel")); err != nil {
		t.Fatal(err)
	}
	if typ, data := fromKernel.readRecord(t, plain); typ != RecordApplicationData || string(data) != "from the kernel" {
		t.Fatalf("the kernel's record: type %d, %q", typ, data)
	}
	toKernel.writeRecord(t, plain, RecordApplicationData, []byte("to the kernel"))
	n, typ, err := readRecordWithin(t, kernel, make([]byte, 64))
	if err != nil || typ != RecordApplicationData || n != len("to the kernel") {
		t.Fatalf("ReadRecord: %d bytes of type %d, %v", n, typ, err)
	}
}

func kernelRecord(t *testing.T, suite cipherSuite, typ byte, content []byte, want error) {
	kernel, plain, toKernel, _ := kernelPair(t, suite)
	toKernel.writeRecord(t, plain, typ, content)
	_, got, err := readRecordWithin(t, kernel, make([]byte, 64))
	if got != typ || !errors.Is(err, want) {
		t.Fatalf("ReadRecord: type %d, %v; want type %d, %v", got, err, typ, want)
	}
}

func kernelTampered(t *testing.T, suite cipherSuite) {
	kernel, plain, toKernel, _ := kernelPair(t, suite)
	toKernel.aead = tamper{toKernel.aead}
	toKernel.writeRecord(t, plain, RecordApplicationData, []byte("altered on the way"))
	if _, _, err := readRecordWithin(t, kernel, make([]byte, 64)); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("ReadRecord of an altered record: %v, want ErrBadRecord", err)
	}
}

// readRecordWithin is ReadRecord on a blocking socket that fails the
// test rather than block it.
func readRecordWithin(t *testing.T, fd int, p []byte) (int, byte, error) {
	t.Helper()
	if err := waitFD(fd, unix.POLLIN, time.Now().Add(waitLong)); err != nil {
		t.Fatal(err)
	}
	return ReadRecord(fd, p)
}

// TestInstallKTLSSaysWhy checks the kernel's refusal is named: on a
// socket that is not connected the kernel refuses the TLS upper layer, and
// the error says which option failed.
func TestInstallKTLSSaysWhy(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	err = installKTLS(fd, testKeys(aes128GCM))
	if err == nil || !strings.Contains(err.Error(), "TCP_ULP") {
		t.Fatalf("kernel TLS on an unconnected socket: %v, want an error naming TCP_ULP", err)
	}
	t.Log(err)
}

// tamper flips a bit of every record it seals.
type tamper struct{ cipher.AEAD }

func (x tamper) Seal(dst, nonce, plaintext, ad []byte) []byte {
	out := x.AEAD.Seal(dst, nonce, plaintext, ad)
	out[len(dst)] ^= 1
	return out
}
