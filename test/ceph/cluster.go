package cephtest

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var cluster struct {
	once sync.Once
	dir  string // the one cluster.sh made
	file string // its client settings, DIR/env
	own  bool   // this process's alone: Stop stops it
	env  map[string]string
	err  error
}

// Use returns the client settings of DIR/env (see cluster.sh): CEPH_CONF,
// CEPH_ADMIN_KEYRING, CEPH_USER, CEPH_KEYRING and CEPH_POOL. The cluster
// is held shared until tb ends. Without the Ceph tools or root it skips
// tb, unless NVMEOF_REQUIRE_TOOLS asks for every test to run.
func Use(tb testing.TB) map[string]string {
	tb.Helper()
	return open(tb, syscall.LOCK_SH)
}

// Exclusive is Use for a test that stops or kills the OSD: it waits until
// no other test, of this process or another, holds the cluster, and keeps
// them out until tb ends. tb must not hold the cluster through Use, nor be
// a subtest of one that does: it would wait for itself.
func Exclusive(tb testing.TB) map[string]string {
	tb.Helper()
	return open(tb, syscall.LOCK_EX)
}

// OSD runs cluster.sh's stop-osd, kill-osd or start-osd; the caller holds
// the cluster through Exclusive.
func OSD(tb testing.TB, cmd string) {
	tb.Helper()
	script, err := clusterScript()
	if err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command(script, cmd, cluster.dir).CombinedOutput(); err != nil {
		tb.Fatalf("cluster.sh %s: %v\n%s", cmd, err, out)
	}
}

// Stop stops and removes the cluster if it is this process's own (no
// NVMEOF_CEPH_ENV); TestMain calls it after m.Run.
func Stop() {
	if !cluster.own {
		return
	}
	if script, err := clusterScript(); err == nil {
		exec.Command(script, "stop", cluster.dir).Run()
	}
	os.RemoveAll(cluster.dir)
}

func open(tb testing.TB, how int) map[string]string {
	tb.Helper()
	missing := ""
	for _, tool := range []string{"ceph-mon", "ceph-osd", "ceph", "rbd"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = tool + " is missing (Debian: apt-get install ceph-mon ceph-osd ceph-common)"
		}
	}
	if missing == "" && os.Geteuid() != 0 {
		missing = "the Ceph cluster runs as root"
	}
	if missing != "" {
		if os.Getenv("NVMEOF_REQUIRE_TOOLS") != "" {
			tb.Fatalf("%s; test/install-deps.sh installs ceph", missing)
		}
		tb.Skipf("NOT RUN: %s; test/run-tests.sh requires it", missing)
	}
	cluster.once.Do(func() { cluster.err = setUp() })
	if cluster.err != nil {
		tb.Fatal(cluster.err)
	}
	if err := hold(tb, how); err != nil {
		tb.Fatal(err)
	}
	return cluster.env
}

// setUp finds the cluster, or starts it: in the directory NVMEOF_CEPH_ENV
// names, if nothing is there yet, or else in one of this process's own.
func setUp() error {
	if p := os.Getenv("NVMEOF_CEPH_ENV"); p != "" {
		cluster.dir, cluster.file = filepath.Dir(p), p
	} else {
		dir, err := os.MkdirTemp("", "nvmeof-ceph-")
		if err != nil {
			return err
		}
		cluster.dir, cluster.file, cluster.own = dir, filepath.Join(dir, "env"), true
	}
	// The first of the test binaries sharing DIR starts the cluster there;
	// the others wait on DIR's lock until it is up.
	gate, err := os.Open(cluster.dir)
	if err != nil {
		return err
	}
	defer gate.Close()
	if err := flock(gate, syscall.LOCK_EX); err != nil {
		return err
	}
	if _, err := os.Stat(cluster.file); errors.Is(err, fs.ErrNotExist) {
		if err := start(); err != nil {
			return err
		}
	}
	cluster.env, err = readEnv(cluster.file)
	return err
}

// start makes the cluster in DIR, its monitor on a free port.
func start() error {
	script, err := clusterScript()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if out, err := exec.Command(script, "start", cluster.dir, strconv.Itoa(port)).CombinedOutput(); err != nil {
		return fmt.Errorf("cluster.sh start: %v\n%s", err, out)
	}
	return nil
}

// hold locks DIR/env (flock, shared or exclusive) until tb ends. DIR's
// lock is a turnstile, held only while waiting for DIR/env's: a test
// waiting to have the cluster alone holds it, so shared users arriving
// later queue behind it rather than keep it out for ever.
func hold(tb testing.TB, how int) error {
	gate, err := os.Open(cluster.dir)
	if err != nil {
		return err
	}
	defer gate.Close() // lets the turnstile go
	if err := flock(gate, syscall.LOCK_EX); err != nil {
		return err
	}
	f, err := os.Open(cluster.file)
	if err != nil {
		return err
	}
	if err := flock(f, how); err != nil {
		f.Close()
		return err
	}
	tb.Cleanup(func() { f.Close() })
	return nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			if err != nil {
				return fmt.Errorf("flock %s: %w", f.Name(), err)
			}
			return nil
		}
	}
}

// clusterScript is cluster.sh's path. Test binaries run in their
// package's directory, below the module's go.mod.
func clusterScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "test", "ceph", "cluster.sh"), nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("cephtest: no go.mod above the working directory")
		}
		dir = up
	}
}

func readEnv(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "="); ok {
			env[k] = v
		}
	}
	return env, nil
}

// CreateImage creates a 16 MiB image of its own in the test pool, its
// name prefix and a timestamp, and returns its name.
func CreateImage(t testing.TB, env map[string]string, prefix string) string {
	t.Helper()
	image := fmt.Sprintf("%s%d", prefix, time.Now().UnixNano())
	out, err := exec.Command("rbd", "--conf", env["CEPH_CONF"], "--id", "admin", "--keyring", env["CEPH_ADMIN_KEYRING"],
		"create", "--size", "16M", env["CEPH_POOL"]+"/"+image).CombinedOutput()
	if err != nil {
		t.Fatalf("rbd create: %v\n%s", err, out)
	}
	return image
}
