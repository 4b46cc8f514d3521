//go:build cgo && !notls

package ktls

import (
	"errors"
	"io"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestServer runs Server against gnutls-cli to the end: the handshake,
// then the data path on the socket alone, with the kernel encrypting.
// Here, with no tls module, the handshake completes and Server stops at
// the kernel with ErrNoKTLS; with NVMEOF_REQUIRE_KTLS=1 on a machine with
// the module, the host's line is read and answered in plain reads and
// writes, and the host ends the connection with close_notify, which reads
// as io.EOF, or with a KeyUpdate, which reads as ErrKeyUpdate.
func TestServer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		end    func(c *gnutlsClient) // the host ends the connection
		typ    byte
		reason error
	}{
		{"close_notify", func(c *gnutlsClient) { c.stdin.Close() }, RecordAlert, io.EOF},
		{"KeyUpdate", func(c *gnutlsClient) { c.stdin.WriteString("^rekey1^\n") }, RecordHandshake, ErrKeyUpdate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, port := listen(t)
			key := testPSK(32, 1)
			args := append(pskArgs(testIdentity, key, clientTLS13+":-CIPHER-ALL:+AES-128-GCM"), "--inline-commands")
			c := startClient(t, port, "hello from the host\n", args...)
			fd := acceptFD(t, ln)
			s, err := Server(fd, lookupOnly(key), time.Now().Add(waitLong))
			if err != nil {
				needKTLS(t, err)
			}
			if s.Identity != testIdentity || s.Cipher != aes128GCM.name {
				t.Errorf("session %+v", s)
			}
			p := make([]byte, 256)
			n, typ, err := readRecordWithin(t, fd, p)
			if err != nil || typ != RecordApplicationData || string(p[:n]) != "hello from the host\n" {
				t.Fatalf("ReadRecord: %q, type %d, %v", p[:n], typ, err)
			}
			if _, err := unix.Write(fd, []byte("hello from the target\n")); err != nil {
				t.Fatal(err)
			}
			c.waitOutput(t, "hello from the target")
			tc.end(c)
			if _, typ, err := readRecordWithin(t, fd, p); typ != tc.typ || !errors.Is(err, tc.reason) {
				t.Fatalf("ReadRecord at the end: type %d, %v; want type %d, %v", typ, err, tc.typ, tc.reason)
			}
		})
	}
}
