//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestScenarios(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the end-to-end suite boots a VM with 9p root sharing and must run as root (see test/run-tests.sh)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatal("qemu-system-x86_64 is missing: run test/install-deps.sh")
	}
	root := repoRoot(t)
	// The guest sees this machine's root read-only, but not its /tmp:
	// build where the guest can run it.
	bin := filepath.Join(root, ".build", "e2e", "nvmeof-tgt")
	build := exec.Command("go", "build", "-o", bin, "./cmd/nvmeof-tgt")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	results, err := os.MkdirTemp("", "nvmeof-tgt-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("E2E_KEEP") == "" {
		defer os.RemoveAll(results)
	}
	// vda: ext4 for file namespaces; vdb: a raw disk for the block backend.
	disk := filepath.Join(results, "disk.img")
	blockDisk := filepath.Join(results, "block.img")
	for path, size := range map[string]int64{disk: 2 << 30, blockDisk: 256 << 20} {
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	run := exec.Command(filepath.Join(root, "test/vm/run-guest.sh"),
		"--script", filepath.Join(root, "test/e2e/guest-run.sh"),
		"--results", results,
		"--disk", disk,
		"--disk", blockDisk,
		"--env", "E2E_DIR="+filepath.Join(root, "test/e2e"),
		"--env", "NVMEOF_TGT="+bin,
		"--env", "E2E_ONLY="+os.Getenv("E2E_ONLY"),
		"--timeout", "1500")
	out, err := run.CombinedOutput()
	t.Logf("guest ran for %s (results in %s)", time.Since(start).Round(time.Second), results)
	if err != nil {
		t.Fatalf("guest: %v\n%s", err, out)
	}

	// Every scenario on disk must have run and passed.
	scripts, _ := filepath.Glob(filepath.Join(root, "test/e2e/scenarios/*.sh"))
	ran := 0
	for _, s := range scripts {
		name := strings.TrimSuffix(filepath.Base(s), ".sh")
		t.Run(name, func(t *testing.T) {
			logText, _ := os.ReadFile(filepath.Join(results, name+".log"))
			rc, err := os.ReadFile(filepath.Join(results, name+".rc"))
			if err != nil {
				if only := os.Getenv("E2E_ONLY"); only != "" {
					t.Skipf("not selected by E2E_ONLY=%s", only)
				}
				t.Fatalf("scenario produced no result\n%s", logText)
			}
			ran++
			if strings.TrimSpace(string(rc)) != "0" {
				target, _ := os.ReadFile(filepath.Join(results, name+"-target.log"))
				t.Fatalf("exit status %s\n--- scenario log\n%s\n--- target log\n%s", strings.TrimSpace(string(rc)), logText, target)
			}
			t.Logf("%s", logText)
		})
	}
	if ran == 0 {
		t.Fatal("no scenario ran")
	}
}
