//go:build cgo && !notls

package ktls

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The handshake tests run gnutls-cli, the client of GnuTLS's command
// line tools, as the host: an independent client that a user has too, in
// place of one of our own making. It takes the PSK in hex and sends what
// it reads on its standard input, a line per record.

const (
	testIdentity = "NVMe0R01 nqn.2014-08.org.nvmexpress:uuid:host nqn.2026-11.io.example:subsys"
	// clientTLS13 is a TLS 1.3 PSK client's priorities, with the ciphers
	// a test appends.
	clientTLS13 = "NORMAL:-VERS-ALL:+VERS-TLS1.3:+PSK:+DHE-PSK:+ECDHE-PSK"
)

// lookupOnly accepts testIdentity alone, with key.
func lookupOnly(key []byte) func(string) ([]byte, error) {
	return func(id string) ([]byte, error) {
		if id != testIdentity {
			return nil, errors.New("not the test's identity")
		}
		return bytes.Clone(key), nil
	}
}

// needTool returns the path of a command a test runs. test/run-tests.sh
// sets NVMEOF_REQUIRE_TOOLS, so a missing one fails there; elsewhere the
// test says NOT RUN and which Debian package has it.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	switch {
	case err == nil:
		return path
	case os.Getenv("NVMEOF_REQUIRE_TOOLS") != "":
		t.Fatalf("%s is missing (Debian package %s): %v", name, pkg, err)
	default:
		t.Skipf("NOT RUN: %s is missing (Debian: apt-get install %s)", name, pkg)
	}
	return ""
}

// lockedBuffer collects a client's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// gnutlsClient is a gnutls-cli connected to the test's listener.
type gnutlsClient struct {
	cmd   *exec.Cmd
	stdin *os.File
	out   *lockedBuffer
	done  chan error
}

// startClient runs gnutls-cli against port with args, and gives it input
// on its standard input, which stays open until the test closes it.
func startClient(t *testing.T, port int, input string, args ...string) *gnutlsClient {
	t.Helper()
	path := needTool(t, "gnutls-cli", "gnutls-bin")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &gnutlsClient{out: &lockedBuffer{}, stdin: w, done: make(chan error, 1)}
	c.cmd = exec.Command(path, append([]string{"-p", strconv.Itoa(port), "127.0.0.1"}, args...)...)
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = r, c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		w.Close()
		c.cmd.Process.Kill()
		<-c.done
		if t.Failed() {
			t.Logf("gnutls-cli said:\n%s", c.out)
		}
	})
	if input != "" {
		if _, err := w.WriteString(input); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// pskArgs are gnutls-cli's arguments for a PSK client.
func pskArgs(identity string, key []byte, priority string) []string {
	return []string{"--pskusername=" + identity, "--pskkey=" + hex.EncodeToString(key), "--priority=" + priority}
}

// waitOutput waits for the client to print want.
func (c *gnutlsClient) waitOutput(t *testing.T, want string) {
	t.Helper()
	for end := time.Now().Add(waitLong); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(c.out.String(), want) {
			return
		}
	}
	t.Fatalf("gnutls-cli did not print %q", want)
}

// listen listens on a loopback port for one test.
func listen(t *testing.T) (net.Listener, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, ln.Addr().(*net.TCPAddr).Port
}

// acceptFD accepts one connection and returns its socket, as the
// transport holds it: a descriptor out of the Go runtime's hands.
func acceptFD(t *testing.T, ln net.Listener) int {
	t.Helper()
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(waitLong))
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return socketOf(t, conn)
}
