package targettest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// FileTarget is a target with port p and the subsystem nqn, open to any
// host, whose namespace 1 is a 4 MiB file of 512-byte blocks at path. Its
// log is discarded, unless the test runs with -v. The test's cleanup
// closes it.
func FileTarget(t testing.TB, p *fabrics.Port, nqn string) (tg *fabrics.Target, path string) {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	if testing.Verbose() {
		log.SetOutput(os.Stderr)
		log.SetLevel(logrus.DebugLevel)
	}
	tg = fabrics.NewTarget(logrus.NewEntry(log))
	if err := tg.AddPort(p); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "ns1.img")
	b, err := backend.Open("file", backend.Options{Path: path, Size: 4 << 20, BlockSize: 512, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	s := fabrics.NewSubsystem(nqn, "", "", true)
	ns, err := fabrics.NewNamespace(1, b, false, [16]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddNamespace(ns); err != nil {
		t.Fatal(err)
	}
	if err := tg.AddSubsystem(s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	return tg, path
}

// Threads is the process's OS thread count, from /proc/self/status.
func Threads(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(b, []byte("\nThreads:"))
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	n, err := strconv.Atoi(string(bytes.TrimSpace(line)))
	if !ok || err != nil {
		t.Fatalf("no thread count in /proc/self/status: %v", err)
	}
	return n
}

// FDs is the process's count of open file descriptors.
func FDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
