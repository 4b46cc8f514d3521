//go:build e2e

package e2e

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// guest is what the one boot of the test guest left behind.
type guest struct {
	results string // host directory the guest wrote to
	err     error  // the guest did not run the scenarios to the end
	output  string // run-guest.sh output and main.log when err != nil
}

var booted guest

// TestMain boots the guest once and runs every scenario in it; the
// subtests of TestScenarios then read what each scenario left.
func TestMain(m *testing.M) {
	booted = boot()
	code := m.Run()
	if os.Getenv("E2E_KEEP") == "" && booted.results != "" {
		os.RemoveAll(booted.results)
	}
	os.Exit(code)
}

// target is the daemon the scenarios run against: nvmeof-tgt (ours, the
// default) or kernel (Linux nvmet-rdma, to check the suite itself).
func target() (string, error) {
	switch t := os.Getenv("NVMEOF_E2E_TARGET"); t {
	case "", "nvmeof-tgt":
		return "nvmeof-tgt", nil
	case "kernel":
		return t, nil
	default:
		return "", fmt.Errorf("NVMEOF_E2E_TARGET=%q: want nvmeof-tgt or kernel", t)
	}
}

// describe is the version builds are stamped with, as the README's build
// command stamps it; "" outside a git checkout (the binary then reports
// the revision Go recorded, or "devel").
func describe(root string) string {
	cmd := exec.Command("git", "describe", "--tags", "--always", "--dirty")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// goBuild builds the command package pkg of the module at root into dir,
// stamped with describe(root), and returns the binary's path.
func goBuild(root, dir, pkg string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(pkg))
	build := exec.Command("go", "build", "-ldflags", "-X main.version="+describe(root), "-o", bin, pkg)
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

func boot() guest {
	fail := func(format string, a ...any) guest { return guest{err: fmt.Errorf(format, a...)} }
	// Missing prerequisites fail the suite; they never skip it.
	if os.Geteuid() != 0 {
		return fail("the end-to-end suite boots a QEMU guest that shares / over 9p and must run as root (see test/run-tests.sh)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return fail("qemu-system-x86_64 is missing: run test/install-deps.sh as root")
	}
	tgt, err := target()
	if err != nil {
		return fail("%v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		return fail("%v", err)
	}
	results, err := os.MkdirTemp("", "nvmeof-tgt-e2e-")
	if err != nil {
		return fail("%v", err)
	}
	g := guest{results: results}

	// The kernel (and its initramfs) first, so a machine without them
	// fails with prepare.sh's message rather than later. E2E_KERNEL (6.1,
	// the default, or 6.12) picks it; run-guest.sh sees the same variable.
	prep := exec.Command(filepath.Join(root, "test/vm/prepare.sh"))
	if out, err := prep.CombinedOutput(); err != nil {
		g.err = fmt.Errorf("guest kernel not ready (run test/install-deps.sh as root): %v\n%s", err, out)
		return g
	}
	env := []string{"TARGET=" + tgt, "E2E_DIR=" + filepath.Join(root, "test/e2e"),
		"E2E_ONLY=" + os.Getenv("E2E_ONLY"), "E2E_SCENARIO_TIMEOUT=" + os.Getenv("E2E_SCENARIO_TIMEOUT")}
	// The scenarios' knobs: the churn scenario's, which the soak test
	// (test/soak) turns, and the soak's own scenario (E2E_EXTRA) and its
	// knobs; the length of 82's and 77's measurements, longer for the
	// figures in docs/performance.md.
	for _, kv := range os.Environ() {
		for _, knob := range []string{"CHURN_", "NEMESIS_", "E2E_EXTRA=", "E2E_TRACE_EXEC=", "POOL_MIX_SECONDS=", "ENGINES_READ_SECONDS="} {
			if strings.HasPrefix(kv, knob) {
				env = append(env, kv)
			}
		}
	}
	bins, err := buildForGuest(root, results, tgt)
	if err != nil {
		g.err = err
		return g
	}
	disks, err := makeDisks(results)
	if err != nil {
		g.err = err
		return g
	}
	g.output, g.err = runGuest(root, results, tgt, append(env, bins...), disks)
	return g
}

// buildForGuest builds what the scenarios run and returns the environment
// that names it. The guest sees this machine's file system at the same
// paths, so binaries built into results run there unchanged.
func buildForGuest(root, results, tgt string) ([]string, error) {
	var env []string
	if tgt == "nvmeof-tgt" {
		bin, err := goBuild(root, results, "./cmd/nvmeof-tgt")
		if err != nil {
			return nil, err
		}
		env = append(env, "NVMEOF_TGT="+bin, "NVMEOF_TGT_VERSION="+describe(root))
		// The Debian package of that binary, which 65-systemd installs.
		deb, err := buildDeb(root, results, bin)
		if err != nil {
			return nil, err
		}
		env = append(env, "NVMEOF_TGT_DEB="+deb)
	}
	// The durability scenarios' writer and checker (test/durability).
	dur, err := goBuild(root, results, "./test/durability/cmd/durability")
	if err != nil {
		return nil, err
	}
	env = append(env, "DURABILITY="+dur)
	// The gateway scenarios' versioned-block writer (test/e2e/vblock).
	vb, err := goBuild(root, results, "./test/e2e/vblock/cmd/vblock")
	if err != nil {
		return nil, err
	}
	env = append(env, "VBLOCK="+vb)
	// The Ceph cluster's monitor commands (test/ceph/cluster.sh, the
	// gateway scenarios' blocklist).
	cephmon, err := goBuild(root, results, "./test/ceph/cmd/cephmon")
	if err != nil {
		return nil, err
	}
	env = append(env, "CEPHMON="+cephmon)
	// The backend package's tests, which need root and loop devices: the
	// guest runs them so that they never go unrun.
	backendTest, err := goTestBuild(root, results, "./backend")
	if err != nil {
		return nil, err
	}
	env = append(env, "BACKEND_TEST="+backendTest)
	// The rdma package's tests that need a real device (TestGuest*), and
	// the raw host the churn scenario drives the target with.
	rdmaTest, err := goTestBuild(root, results, "./rdma")
	if err != nil {
		return nil, err
	}
	rdmahost, err := goBuild(root, results, "./test/rdmahost/cmd/rdmahost")
	if err != nil {
		return nil, err
	}
	// The hostile NVMe/TCP host of the isolation scenario.
	tcphost, err := goBuild(root, results, "./test/tcphost/cmd/tcphost")
	if err != nil {
		return nil, err
	}
	// The ktls package's tests of kernel TLS, which this machine's kernel
	// may not have: the TLS scenario runs them in the guest.
	ktlsTest, err := goTestBuild(root, results, "./ktls")
	if err != nil {
		return nil, err
	}
	return append(env, "RDMA_TEST="+rdmaTest, "RDMAHOST="+rdmahost, "TCPHOST="+tcphost, "KTLS_TEST="+ktlsTest), nil
}

// buildDeb packages bin with dist/build-deb.sh into dir, uncompressed
// (it is read once, from this machine's disk), and returns its path.
func buildDeb(root, dir, bin string) (string, error) {
	build := exec.Command(filepath.Join(root, "dist/build-deb.sh"), dir)
	build.Env = append(os.Environ(), "NVMEOF_TGT_BINARY="+bin, "DPKG_DEB_COMPRESSOR_TYPE=none")
	var stderr strings.Builder
	build.Stderr = &stderr
	out, err := build.Output()
	if err != nil {
		return "", fmt.Errorf("dist/build-deb.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// goTestBuild builds the test binary of package pkg into dir as
// <name>.test and returns its path.
func goTestBuild(root, dir, pkg string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(pkg)+".test")
	build := exec.Command("go", "test", "-c", "-o", bin, pkg)
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the tests of %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// makeDisks creates the guest's disks: vda, ext4 for file namespaces;
// vdb, a raw disk for the block backend; vdc, for the Ceph cluster of the
// rbd scenarios (sparse: it takes what the OSD writes).
func makeDisks(results string) ([]string, error) {
	disks := []string{filepath.Join(results, "disk.img"), filepath.Join(results, "block.img"), filepath.Join(results, "ceph.img")}
	for i, size := range []int64{2 << 30, 256 << 20, 4 << 30} {
		if err := os.WriteFile(disks[i], nil, 0o644); err != nil {
			return nil, err
		}
		if err := os.Truncate(disks[i], size); err != nil {
			return nil, err
		}
	}
	return disks, nil
}

// runGuest boots the guest, which runs every selected scenario; when it
// did not get through, it returns the output to show and the error.
func runGuest(root, results, tgt string, env, disks []string) (string, error) {
	// E2E_GUEST_TIMEOUT: seconds the whole guest run may take. The whole
	// suite on 6.1 takes about 24 min alone on a 2-core machine, more beside
	// other work; the soak test's runs take longer.
	timeout := os.Getenv("E2E_GUEST_TIMEOUT")
	if timeout == "" {
		timeout = "2100"
	}
	args := []string{
		"--script", filepath.Join(root, "test/e2e/guest-run.sh"),
		"--results", filepath.Join(results, "guest"),
		"--timeout", timeout,
	}
	for _, d := range disks {
		args = append(args, "--disk", d)
	}
	for _, e := range env {
		args = append(args, "--env", e)
	}
	start := time.Now()
	run := exec.Command(filepath.Join(root, "test/vm/run-guest.sh"), args...)
	out, err := run.CombinedOutput()
	fmt.Printf("e2e: target %s, guest kernel %s; guest ran for %s (boot %s s); results in %s\n",
		tgt, read(results, "guest/kernel"), time.Since(start).Round(time.Second), read(results, "guest/boot.secs"), results)
	if err != nil {
		return string(out) + "\n--- main.log\n" + read(results, "guest/main.log") +
				"\n--- setup.log\n" + read(results, "guest/setup.log"),
			fmt.Errorf("the guest did not run the scenarios to the end: %v", err)
	}
	return "", nil
}

// read returns a file under dir, or "" if it cannot be read.
func read(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return strings.TrimSpace(string(b))
}

func TestScenarios(t *testing.T) {
	if booted.err != nil {
		if booted.results == "" {
			t.Fatalf("%v\n%s", booted.err, booted.output)
		}
		// Still report each scenario the guest got through.
		t.Errorf("%v\n%s", booted.err, booted.output)
	}
	res := filepath.Join(booted.results, "guest")
	scripts, err := filepath.Glob("scenarios/*.sh")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scenario scripts found (%v)", err)
	}
	// E2E_EXTRA: a scenario outside the suite, which the guest runs after
	// it (a soak test's, test/soak).
	if extra := os.Getenv("E2E_EXTRA"); extra != "" {
		scripts = append(scripts, extra)
	}
	// The guest matches E2E_ONLY with bash's =~ (POSIX extended regular
	// expressions); the suite's expressions mean the same in Go's syntax.
	only, err := regexp.Compile(os.Getenv("E2E_ONLY"))
	if err != nil {
		t.Fatalf("E2E_ONLY: %v", err)
	}
	ran := 0
	var times []scenarioTime
	for _, s := range scripts {
		name := strings.TrimSuffix(filepath.Base(s), ".sh")
		t.Run(name, func(t *testing.T) {
			logText := read(res, name+".log")
			rc := read(res, name+".rc")
			if rc == "" {
				if !only.MatchString(name) {
					t.Skipf("not selected by E2E_ONLY=%s", only)
				}
				// Selected: the guest stopped before it, or lost its result.
				t.Fatalf("scenario produced no result\n%s", logText)
			}
			if secs, err := strconv.ParseFloat(read(res, name+".secs"), 64); err == nil {
				times = append(times, scenarioTime{name, secs, read(res, name+".busy")})
			}
			if rc != "0" {
				t.Fatalf("exit status %s after %s s\n--- scenario log\n%s\n--- target log\n%s",
					rc, read(res, name+".secs"), logText, read(res, name+"-target.log"))
			}
			if reason := read(res, name+".skip"); reason != "" {
				t.Skipf("not for this target: %s", reason)
			}
			ran++
			t.Logf("passed in %s s\n%s", read(res, name+".secs"), logText)
		})
	}
	printTimes(booted.results, times)
	if ran == 0 {
		t.Fatal("no scenario ran")
	}
}

// scenarioTime is a scenario's time in the guest.
type scenarioTime struct {
	name string
	secs float64
	busy string // the guest's CPUs, per cent busy while it ran
}

// printTimes prints the scenarios' guest times, longest first, with how
// busy they kept the guest's CPUs, and their sum beside the guest's boot,
// so a run shows where its time went and whether it was work or waiting.
func printTimes(results string, times []scenarioTime) {
	if len(times) == 0 {
		return
	}
	slices.SortFunc(times, func(a, b scenarioTime) int { return cmp.Compare(b.secs, a.secs) })
	var sum float64
	var b strings.Builder
	for _, st := range times {
		sum += st.secs
		fmt.Fprintf(&b, "  %7.1f s  %-22s CPUs %3s %% busy\n", st.secs, st.name, st.busy)
	}
	fmt.Printf("e2e: scenario times in the guest, longest first (%d scenarios, %.0f s, boot %s s):\n%s",
		len(times), sum, read(results, "guest/boot.secs"), b.String())
}
