package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCLI(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte(`
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - {nqn: nqn.2026-11.io.example:a, allow_any_host: true, namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]}
`), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(`
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - {nqn: nqn.2026-11.io.example:a, allow_any_host: true, namespaces: [{nsid: 1, backend: flie, path: /x, size: 1GiB}]}
`), 0o644)
	shared := filepath.Join(dir, "shared.yaml")
	os.WriteFile(shared, []byte(`
ports: [{id: 1, address: 10.0.0.1}, {id: 2, address: 10.0.0.2}]
subsystems:
  - {nqn: nqn.2026-11.io.example:a, allow_any_host: true, namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]}
`), 0o644)
	cases := []struct {
		name   string
		args   []string
		code   int
		output string
	}{
		{"version", []string{"-version"}, 0, "nvmeof-tgt " + version},
		{"check good", []string{"-check", "-config", good}, 0, "configuration is valid"},
		{"check bad", []string{"-check", "-config", bad}, 1, `subsystems[0].namespaces[0].backend: unknown backend "flie"`},
		{"check warns", []string{"-check", "-config", shared}, 0, "shared.yaml: warning: subsystems[0].ports: served on every port (1, 2), but no port sets an ANA state"},
		{"missing file", []string{"-check", "-config", filepath.Join(dir, "none.yaml")}, 1, "no such file"},
		{"bad flag", []string{"-bogus"}, 2, "flag provided but not defined"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := run(tc.args, &out, &out); code != tc.code {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tc.code, out.String())
			}
			if !strings.Contains(out.String(), tc.output) {
				t.Fatalf("output lacks %q:\n%s", tc.output, out.String())
			}
		})
	}
}

var buildVersions = []struct {
	name, stamped string
	info          *debug.BuildInfo
	want          string
}{
	{"stamped", "v1.2.0-3-g0123456-dirty", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "ffff"}}}, "v1.2.0-3-g0123456-dirty"},
	{"revision", "", &debug.BuildInfo{Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "6af4c94d2e1b7f0a9c3e5d7b1a2c4e6f8a0b2c4d"}, {Key: "vcs.modified", Value: "false"}}}, "6af4c94d2e1b"},
	{"dirty revision", "", &debug.BuildInfo{Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "6af4c94d2e1b7f0a9c3e5d7b1a2c4e6f8a0b2c4d"}, {Key: "vcs.modified", Value: "true"}}}, "6af4c94d2e1b-dirty"},
	{"module version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}}, "v0.3.0"},
	{"nothing recorded", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
	{"no build info", "", nil, "devel"},
}

func TestBuildVersion(t *testing.T) {
	for _, tc := range buildVersions {
		read := func() (*debug.BuildInfo, bool) { return tc.info, tc.info != nil }
		if got := buildVersion(tc.stamped, read); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// A test binary records no VCS revision, but it has build info.
	if version == "" {
		t.Fatal("version is empty")
	}
}

// The firmware revision hosts read in Identify tells builds apart within
// its 8 bytes.
func TestFirmwareRevision(t *testing.T) {
	for v, want := range map[string]string{
		"0.1.0":                   "0.1.0",
		"6af4c94":                 "6af4c94",
		"6af4c94-dirty":           "6af4c94+",
		"6af4c94d2e1b":            "6af4c94d",
		"6af4c94d2e1b-dirty":      "6af4c94+",
		"v0.2.0-5-g1a2b3c4":       "1a2b3c4",
		"v0.2.0-5-g1a2b3c4-dirty": "1a2b3c4+",
		"v0.10.0-rc1":             "v0.10.0-",
		"devel":                   "devel",
	} {
		if got := firmwareRevision(v); got != want {
			t.Errorf("firmwareRevision(%q) = %q, want %q", v, got, want)
		}
	}
}

// The daemon (and ctl, which may read a secret from standard input) makes
// itself non-dumpable with no core size before it reads any secret.
func TestNoCoreDumps(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: 1 << 20, Max: 1 << 20})
	run([]string{"-version"}, io.Discard, io.Discard)
	if v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || v != 0 {
		t.Fatalf("dumpable %d (%v) after run", v, err)
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &lim); err != nil || lim.Cur != 0 {
		t.Fatalf("core size limit %d (%v) after run", lim.Cur, err)
	}
}
