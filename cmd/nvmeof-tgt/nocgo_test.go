package main

import (
	"bufio"
	"debug/elf"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/tcphost"
)

// A build without cgo links no shared library and serves NVMe/TCP: a host
// connects, identifies the controller and reads. An RDMA port it refuses
// at start, saying what to do.
func TestBuildWithoutCgoServesTCP(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "nvmeof-tgt")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	libs, err := f.ImportedLibraries()
	f.Close()
	if err != nil || len(libs) != 0 {
		t.Fatalf("the build without cgo links %v (%v), want no shared library", libs, err)
	}

	addr := freeTCPAddress(t)
	host, port, _ := net.SplitHostPort(addr)
	const nqn = "nqn.2026-11.io.example:nocgo"
	cfg := writeConfig(t, dir, fmt.Sprintf(`ports: [{id: 1, transport: tcp, address: %s, port: %s}]
subsystems: [{nqn: %s, allow_any_host: true, namespaces: [{nsid: 1, backend: nullblk, size: 64MiB}]}]
`, host, port, nqn))
	daemon := exec.Command(bin, "-config", cfg)
	stderr, err := daemon.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	defer daemon.Process.Kill()
	waitForLine(t, bufio.NewScanner(stderr), "nvmeof-tgt serving")

	admin, err := tcphost.Controller("", addr, nqn, "", 1)
	if err != nil {
		t.Fatalf("connecting over TCP: %v", err)
	}
	defer admin.Close()
	if st, err := admin.Identify(nvme.CNSController); err != nil || st != 0 {
		t.Fatalf("Identify: %v %v", st, err)
	}
	io, err := admin.IOQueue("", addr, nqn, 1, 32)
	if err != nil {
		t.Fatalf("connecting an I/O queue: %v", err)
	}
	defer io.Close()
	if st, err := io.Read(1, 0, 4096, 512); err != nil || st != 0 {
		t.Fatalf("read: %v %v", st, err)
	}
	daemon.Process.Signal(syscall.SIGTERM)
	if err := daemon.Wait(); err != nil {
		t.Fatalf("the daemon's exit after SIGTERM: %v", err)
	}

	rdmaCfg := writeConfig(t, dir, "ports: [{id: 1, address: 127.0.0.1}]\nsubsystems: []\n")
	out, err := exec.Command(bin, "-config", rdmaCfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "built without cgo") || !strings.Contains(string(out), "transport: tcp") {
		t.Fatalf("an RDMA port in a build without cgo: %v\n%s", err, out)
	}
}

// writeConfig writes a configuration with the daemon's files in dir.
func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "config.yaml")
	y := fmt.Sprintf("control: {socket: %s/ctl.sock}\nstate_file: %s/state.json\n%s", dir, dir, body)
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// freeTCPAddress is a loopback address no one listens on now.
func freeTCPAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitForLine reads the daemon's log until a line holds want; the log
// ending first fails the test.
func waitForLine(t *testing.T, sc *bufio.Scanner, want string) {
	t.Helper()
	var seen []string
	for sc.Scan() {
		if strings.Contains(sc.Text(), want) {
			go func() {
				for sc.Scan() {
				}
			}()
			return
		}
		seen = append(seen, sc.Text())
	}
	t.Fatalf("the daemon's log ended without %q:\n%s", want, strings.Join(seen, "\n"))
}
