//go:build !norbd && cgo

package backend

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// mapped reports whether a library of that name is in this process.
func mapped(t *testing.T, lib string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), "/"+lib)
}

// Ceph's libraries are not loaded when the program starts, only for the
// first cluster connection. The check runs in a child process of this
// test binary, where no other test has connected.
func TestCephLoadedOnFirstConnection(t *testing.T) {
	if os.Getenv("NVMEOF_CEPH_LOAD_CHILD") == "1" {
		for _, lib := range []string{"librados.so", "librbd.so", "libceph-common.so"} {
			if mapped(t, lib) {
				t.Fatalf("%s is loaded before any cluster connection", lib)
			}
		}
		if err := loadCeph(); err != nil {
			t.Fatal(err)
		}
		for _, lib := range []string{"librados.so", "librbd.so"} {
			if !mapped(t, lib) {
				t.Fatalf("%s is not loaded after loadCeph", lib)
			}
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCephLoadedOnFirstConnection$", "-test.count=1")
	cmd.Env = append(os.Environ(), "NVMEOF_CEPH_LOAD_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// Without the libraries, a connection fails with the reason and what to
// install, not at the daemon's start.
func TestCephLibrariesMissing(t *testing.T) {
	err := loadCephLibs("librados.so.2", "librbd-missing.so.1")
	if err == nil {
		t.Fatal("loading a library that does not exist succeeded")
	}
	for _, want := range []string{"librbd-missing.so.1", "apt install librados2 librbd1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
