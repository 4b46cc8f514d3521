package backend

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// alignedBuf returns page-aligned memory, as registered buffers are, so
// that O_DIRECT accepts it.
func alignedBuf(t testing.TB, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// pattern fills an aligned buffer with bytes that depend on seed.
func pattern(t testing.TB, n int, seed byte) []byte {
	b := alignedBuf(t, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func isZero(b []byte) bool { return bytes.Count(b, []byte{0}) == len(b) }

// directOK reports whether dir's file system takes O_DIRECT.
func directOK(dir string) bool {
	path := filepath.Join(dir, ".nvmeof-tgt-direct-probe")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_DIRECT, 0o644)
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(path)
	return true
}

func mustOpen(t testing.TB, kind string, opts Options) Backend {
	t.Helper()
	b, err := Open(kind, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestRegistry(t *testing.T) {
	if got := strings.Join(Names(), " "); got != "block file nullblk rbd" { // rbd too with -tags norbd, to say the build lacks it
		t.Errorf("Names() = %s", got)
	}
	_, err := Open("flie", Options{})
	if !errors.Is(err, ErrUnknown) || err.Error() != `unknown backend "flie"` {
		t.Fatalf("unknown backend: %v", err)
	}
}
