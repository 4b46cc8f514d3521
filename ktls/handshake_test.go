//go:build cgo && !notls

package ktls

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestHandshakeKeysCarryTheRecords checks what would go to the kernel
// without a kernel that takes it: after the handshake the host's first
// record, sent right behind its Finished, is still in the socket, and
// opens with the exported receive key, IV and sequence number; a record
// sealed with the exported send keys is one the host reads, and so is a
// close_notify after it. The send sequence number is 0: no session ticket
// went out under the traffic keys.
func TestHandshakeKeysCarryTheRecords(t *testing.T) {
	for _, tc := range []struct {
		cipher  string
		pskSize int
		suite   cipherSuite
		decrypt bool // the standard library has AES-GCM, not ChaCha20-Poly1305
	}{
		{"AES-128-GCM", 32, aes128GCM, true},
		{"AES-256-GCM", 48, aes256GCM, true},
		{"CHACHA20-POLY1305", 32, chacha20, false},
	} {
		t.Run(tc.cipher, func(t *testing.T) {
			ln, port := listen(t)
			key := testPSK(tc.pskSize, 1)
			c := startClient(t, port, "hello from the host\n",
				pskArgs(testIdentity, key, clientTLS13+":-CIPHER-ALL:+"+tc.cipher)...)
			fd := acceptFD(t, ln)
			s, k, err := negotiate(fd, lookupOnly(key), time.Now().Add(waitLong))
			if tc.pskSize == 48 {
				// gnutls-cli binds every PSK to SHA-256 (src/cli.c), as
				// GnuTLS before 3.8.11 does on either side.
				if sha384PSK {
					t.Skip("NOT RUN: gnutls-cli binds a 48-byte PSK to SHA-256; the SHA-384 handshake takes a tlshd host")
				}
				if !errors.Is(err, ErrUnsupportedPSK) {
					t.Fatalf("a SHA-384 PSK with a GnuTLS that binds PSKs to SHA-256 alone: %v, want ErrUnsupportedPSK", err)
				}
				c.waitOutput(t, "Received alert [40]")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer k.clear()
			if s.Identity != testIdentity || s.Version != "TLS1.3" || s.Cipher != tc.suite.name || s.KeyExchange != "ECDHE-PSK" {
				t.Errorf("session %+v, want identity %q, TLS1.3, %s and ECDHE-PSK", s, testIdentity, tc.suite.name)
			}
			if k.suite != tc.suite || k.rx.seq != 0 || k.tx.seq != 0 {
				t.Errorf("keys for %s, sequence numbers %d received, %d sent; want %s, 0 and 0", k.suite.name, k.rx.seq, k.tx.seq, tc.suite.name)
			}
			if bytes.Equal(k.rx.key, k.tx.key) || bytes.Equal(k.rx.iv, k.tx.iv) {
				t.Error("the two directions have the same key or IV")
			}
			if tc.decrypt {
				exchangeRecords(t, fd, c, k)
			}
		})
	}
}

// exchangeRecords reads the host's first record and answers it by hand
// with k.
func exchangeRecords(t *testing.T, fd int, c *gnutlsClient, k *keyMaterial) {
	t.Helper()
	rx := newRecordAEAD(t, &k.rx)
	if typ, data := rx.readRecord(t, fd); typ != RecordApplicationData || string(data) != "hello from the host\n" {
		t.Fatalf("the host's first record: type %d, %q; want application data, %q", typ, data, "hello from the host\n")
	}
	tx := newRecordAEAD(t, &k.tx)
	tx.writeRecord(t, fd, RecordApplicationData, []byte("hello from the target\n"))
	c.waitOutput(t, "hello from the target")
	tx.writeRecord(t, fd, RecordAlert, []byte{1, 0})
	c.waitOutput(t, "Peer has closed the GnuTLS connection")
}

// TestHandshakeKeyExchange: the controller takes (EC)DHE over a host's
// order, and a host that offers PSK alone gets PSK alone.
func TestHandshakeKeyExchange(t *testing.T) {
	for _, tc := range []struct{ offer, want string }{
		{":-KX-ALL:+PSK:+ECDHE-PSK", "ECDHE-PSK"}, // psk_ke first
		{":-KX-ALL:+PSK", "PSK"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			ln, port := listen(t)
			key := testPSK(32, 1)
			startClient(t, port, "", pskArgs(testIdentity, key, clientTLS13+tc.offer)...)
			fd := acceptFD(t, ln)
			s, k, err := negotiate(fd, lookupOnly(key), time.Now().Add(waitLong))
			if err != nil {
				t.Fatal(err)
			}
			k.clear()
			if s.KeyExchange != tc.want {
				t.Errorf("host offering %s: key exchange %s, want %s", tc.offer, s.KeyExchange, tc.want)
			}
		})
	}
}

// TestHandshakeRefusesClients runs clients the controller must refuse,
// each on a connection of its own: every one ends with its own sentinel,
// and the client is told.
func TestHandshakeRefusesClients(t *testing.T) {
	key := testPSK(32, 1)
	errWho := errors.New("no such host here")
	refuse := func(string) ([]byte, error) { return nil, errWho }
	for _, tc := range []struct {
		name   string
		lookup func(string) ([]byte, error)
		args   []string
		want   error
		client string // what gnutls-cli prints for it: the alert it gets
	}{
		{"wrong key", lookupOnly(key), pskArgs(testIdentity, testPSK(32, 2), clientTLS13), ErrBadKey, "Received alert [51]"},
		{"identity refused", refuse, pskArgs(testIdentity, key, clientTLS13), errWho, "Received alert [115]"},
		{"lookup panics", func(string) ([]byte, error) { panic("a bug in the lookup") }, pskArgs(testIdentity, key, clientTLS13), ErrIdentityRefused, "Received alert [115]"},
		{"TLS 1.2", lookupOnly(key), pskArgs(testIdentity, key, "NORMAL:-VERS-ALL:+VERS-TLS1.2:+PSK:+DHE-PSK:+ECDHE-PSK"), ErrVersion, "Received alert [70]"},
		{"certificates only", lookupOnly(key), []string{"--insecure", "--priority=NORMAL:-VERS-ALL:+VERS-TLS1.3"}, ErrNoPSK, "Received alert [40]"},
		{"SHA-384 suite for a SHA-256 PSK", lookupOnly(key), pskArgs(testIdentity, key, clientTLS13+":-CIPHER-ALL:+AES-256-GCM"), ErrCipher, "Received alert [40]"},
		{"a cipher the kernel does not run", lookupOnly(key), pskArgs(testIdentity, key, clientTLS13+":-CIPHER-ALL:+AES-128-CCM"), ErrCipher, "Received alert [40]"},
		{"a PSK of no hash's size", func(string) ([]byte, error) { return testPSK(16, 1), nil }, pskArgs(testIdentity, testPSK(16, 1), clientTLS13), ErrUnsupportedPSK, "Received alert [40]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, port := listen(t)
			c := startClient(t, port, "", tc.args...)
			fd := acceptFD(t, ln)
			_, k, err := negotiate(fd, tc.lookup, time.Now().Add(waitLong))
			if k != nil || !errors.Is(err, tc.want) {
				t.Fatalf("got keys %v, error %v; want %v", k != nil, err, tc.want)
			}
			t.Logf("%v", err)
			c.waitOutput(t, tc.client)
		})
	}
}

// TestHandshakeRefusesRawPeers runs peers that are no TLS client, or
// stop being one part way.
func TestHandshakeRefusesRawPeers(t *testing.T) {
	// A ClientHello record's header and the start of its body, short of
	// the 200 bytes the header announces.
	partial := append([]byte{0x16, 3, 1, 0, 200, 1, 0, 0, 196, 3, 3}, bytes.Repeat([]byte{7}, 20)...)
	icreq := []byte{0, 0, 128, 0, 128, 0, 0, 0, 0, 0, 0, 0}
	for _, tc := range []struct {
		name  string
		send  []byte
		close bool // after sending
		want  error
		words string
	}{
		{"silent", nil, false, ErrTimeout, "waiting for the ClientHello"},
		{"stalls in the ClientHello", partial, false, ErrTimeout, "in the handshake"},
		{"closes at once", nil, true, ErrPeerClosed, "before its ClientHello"},
		{"closes in the ClientHello", partial, true, ErrPeerClosed, ""},
		{"HTTP", []byte("GET / HTTP/1.1\r\n\r\n"), false, ErrNotTLS, "0x47"},
		{"NVMe/TCP without TLS", icreq, false, ErrNotTLS, "ICReq"},
		{"a ClientHello of garbage", []byte{0x16, 3, 3, 0, 8, 1, 0, 0, 4, 0xff, 0xff, 0xff, 0xff}, false, ErrHandshake, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, _ := listen(t)
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fd := acceptFD(t, ln)
			if _, err := conn.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.close {
				conn.Close()
			}
			start := time.Now()
			_, _, err = negotiate(fd, lookupOnly(testPSK(32, 1)), start.Add(300*time.Millisecond))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.words) {
				t.Fatalf("%v; want %v, saying %q", err, tc.want, tc.words)
			}
			if tc.want == ErrTimeout && !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("%v is not os.ErrDeadlineExceeded", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v, past a 300ms deadline", d)
			}
			t.Logf("%v", err)
		})
	}
}
