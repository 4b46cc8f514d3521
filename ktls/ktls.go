package ktls

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// linux/tls.h, which golang.org/x/sys/unix does not carry.
const (
	tlsTX             = 1      // TLS_TX
	tlsRX             = 2      // TLS_RX
	tlsRXExpectNoPad  = 4      // TLS_RX_EXPECT_NO_PAD
	tlsGetRecordType  = 2      // TLS_GET_RECORD_TYPE, a cmsg
	tls13Version      = 0x0304 // TLS_1_3_VERSION
	tlsIVSize         = 12     // a TLS 1.3 AEAD's per-record nonce, salt and IV together
	tlsRecordSeqBytes = 8
)

// cipherSuite is a TLS 1.3 cipher suite the kernel can run, with what
// its crypto_info (struct tls12_crypto_info_*) holds.
type cipherSuite struct {
	name     string
	kernel   uint16 // TLS_CIPHER_*
	keySize  int
	saltSize int // the head of the IV, which the kernel keeps apart
	hashSize int // the suite's hash's, which is the PSK's size
}

var (
	aes128GCM = cipherSuite{name: "TLS_AES_128_GCM_SHA256", kernel: 51, keySize: 16, saltSize: 4, hashSize: 32}
	aes256GCM = cipherSuite{name: "TLS_AES_256_GCM_SHA384", kernel: 52, keySize: 32, saltSize: 4, hashSize: 48}
	chacha20  = cipherSuite{name: "TLS_CHACHA20_POLY1305_SHA256", kernel: 54, keySize: 32, saltSize: 0, hashSize: 32}
)

// trafficKeys are one direction's: the AEAD key, the 12-byte IV and the
// sequence number of the next record, as GnuTLS left them.
type trafficKeys struct {
	key, iv []byte
	seq     uint64
}

// keyMaterial is what the kernel needs to carry on where GnuTLS stopped.
type keyMaterial struct {
	suite  cipherSuite
	rx, tx trafficKeys
}

func (k *keyMaterial) clear() {
	if k == nil {
		return
	}
	clear(k.rx.key)
	clear(k.rx.iv)
	clear(k.tx.key)
	clear(k.tx.iv)
}

// cryptoInfo lays out struct tls12_crypto_info_{aes_gcm_128,aes_gcm_256,
// chacha20_poly1305} for TLS 1.3: version and cipher type in host order,
// then the IV past the salt, the key, the salt and the sequence number
// big-endian, byte arrays with no padding between them.
func (s cipherSuite) cryptoInfo(k trafficKeys) ([]byte, error) {
	if len(k.key) != s.keySize || len(k.iv) != tlsIVSize {
		return nil, fmt.Errorf("ktls: %s takes a %d-byte key and a %d-byte IV, not %d and %d",
			s.name, s.keySize, tlsIVSize, len(k.key), len(k.iv))
	}
	b := make([]byte, 4, 4+tlsIVSize+s.keySize+tlsRecordSeqBytes)
	binary.NativeEndian.PutUint16(b[0:], tls13Version)
	binary.NativeEndian.PutUint16(b[2:], s.kernel)
	b = append(b, k.iv[s.saltSize:]...)
	b = append(b, k.key...)
	b = append(b, k.iv[:s.saltSize]...)
	return binary.BigEndian.AppendUint64(b, k.seq), nil
}

// installKTLS hands both directions of fd to the kernel. A failure part
// way leaves the socket fit only for closing, which is what the caller
// does with a connection whose handshake did not end in kernel TLS.
func installKTLS(fd int, k *keyMaterial) error {
	if err := unix.SetsockoptString(fd, unix.SOL_TCP, unix.TCP_ULP, "tls"); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%w: setsockopt TCP_ULP \"tls\": %v", ErrNoKTLS, err)
		}
		return fmt.Errorf("ktls: setsockopt TCP_ULP \"tls\": %w", err)
	}
	for _, d := range []struct {
		opt  int
		name string
		keys trafficKeys
	}{{tlsTX, "TLS_TX", k.tx}, {tlsRX, "TLS_RX", k.rx}} {
		info, err := k.suite.cryptoInfo(d.keys)
		if err != nil {
			return err
		}
		err = setsockoptBytes(fd, unix.SOL_TLS, d.opt, info)
		clear(info)
		if err != nil {
			return fmt.Errorf("ktls: setsockopt %s (%s): %w", d.name, k.suite.name, err)
		}
	}
	// Linux hosts do not pad their records, so the kernel may decrypt
	// straight into the reader's buffer. Kernels before 6.0 do not know
	// the option, and lose nothing but that copy.
	one := binary.NativeEndian.AppendUint32(nil, 1)
	_ = setsockoptBytes(fd, unix.SOL_TLS, tlsRXExpectNoPad, one)
	return nil
}

// setsockoptBytes is setsockopt with a buffer that can be cleared after,
// which a string (unix.SetsockoptString) cannot.
func setsockoptBytes(fd, level, opt int, b []byte) error {
	_, _, errno := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
