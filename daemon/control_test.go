package daemon

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/ctl"
	cephtest "github.com/nvmeof-tgt/nvmeof-tgt/test/ceph"
)

// TestMain lets the test binary play a client run as another user: ctl,
// or a raw JSON-RPC client that prints the first response line.
func TestMain(m *testing.M) {
	if sock := os.Getenv("NVMEOF_TGT_TEST_CTL_CLIENT"); sock != "" {
		os.Exit(ctl.Run([]string{"-socket", sock, "list"}, os.Stdout, os.Stderr))
	}
	if sock := os.Getenv("NVMEOF_TGT_TEST_RPC_CLIENT"); sock != "" {
		os.Exit(rawClient(sock))
	}
	if cfg := os.Getenv(gatewayChildEnv); cfg != "" {
		os.Exit(gatewayChild(cfg))
	}
	code := m.Run()
	cephtest.Stop()
	os.Exit(code)
}

func rawClient(sock string) int {
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer c.Close()
	fmt.Fprintln(c, `{"jsonrpc":"2.0","id":1,"method":"get_version"}`)
	line, err := bufio.NewReader(c).ReadString('\n')
	fmt.Print(line)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	return 0
}

// The admin socket answers root and the daemon's own user only, even when
// the file system would let others reach it.
func TestControlSocketRefusesOtherUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("NEEDS ROOT: runs a client as another user; run go test as root, as the test suite does, to cover the peer check")
	}
	_, _, d := startBase(t)
	dir, err := os.MkdirTemp("", "nvmeof-tgt-ctl-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	sock := filepath.Join(dir, "ctl.sock")
	cs, err := api.Listen(sock, d, "", Version, d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	os.Chmod(sock, 0o666) // so that only the credential check stands in the way

	// The test binary, where another user may run it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "client")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(uid uint32, mode string) (string, error) {
		cmd := exec.Command(bin)
		cmd.Env = []string{mode + "=" + sock}
		if uid != 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	const ctl, raw = "NVMEOF_TGT_TEST_CTL_CLIENT", "NVMEOF_TGT_TEST_RPC_CLIENT"
	if out, err := run(0, ctl); err != nil || !strings.Contains(out, "subsystem nqn.2026-11.io.example:a") {
		t.Fatalf("root: %v\n%s", err, out)
	}
	if out, err := run(0, raw); err != nil || !strings.Contains(out, `"api_version":1`) {
		t.Fatalf("root, JSON-RPC: %v\n%s", err, out)
	}
	out, err := run(65534, ctl)
	if err == nil || !strings.Contains(out, "permission denied") || strings.Contains(out, "subsystem nqn") {
		t.Fatalf("another user: %v\n%s", err, out)
	}
	out, err = run(65534, raw)
	if err != nil || !strings.Contains(out, `"code":-32003`) || strings.Contains(out, "api_version") {
		t.Fatalf("another user, JSON-RPC: %v\n%s", err, out)
	}
}
