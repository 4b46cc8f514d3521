package dist

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

const (
	conffile = "/etc/nvmeof-tgt/config.yaml"
	binary   = "/usr/bin/nvmeof-tgt"
)

// The files the package installs, with their modes.
var packaged = map[string]string{
	binary:                                   "-rwxr-xr-x",
	"/lib/systemd/system/nvmeof-tgt.service": "-rw-r--r--",
	"/usr/share/nvmeof-tgt/nvmeof-tgt-alerts.yml":  "-rw-r--r--",
	"/usr/share/nvmeof-tgt/prometheus-scrape.yml":  "-rw-r--r--",
	"/usr/share/nvmeof-tgt/grafana-dashboard.json": "-rw-r--r--",
	conffile:                              "-rw-------", // may hold DH-HMAC-CHAP secrets
	"/usr/share/doc/nvmeof-tgt/copyright": "-rw-r--r--",
	"/usr/share/doc/nvmeof-tgt/examples/tcp.yaml": "-rw-r--r--",
}

// deb is a package build-deb.sh built, unpacked.
type deb struct {
	path    string
	root    string // the files
	control string // DEBIAN/
}

// buildDeb runs build-deb.sh on a stand-in binary, /usr/bin/true:
// building the daemon takes far longer than everything else here, and
// the e2e scenario 65-systemd installs a package of the real one.
func buildDeb(t *testing.T) deb {
	t.Helper()
	dpkgDeb := needTool(t, "dpkg-deb", "dpkg")
	needTool(t, "readelf", "binutils")
	dir := t.TempDir()
	cmd := exec.Command("./build-deb.sh", dir)
	cmd.Env = append(os.Environ(), "NVMEOF_TGT_BINARY=/usr/bin/true", "DPKG_DEB_COMPRESSOR_TYPE=gzip")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("build-deb.sh: %v\n%s", err, stderr.Bytes())
	}
	d := deb{path: strings.TrimSpace(string(out)), root: filepath.Join(dir, "root"), control: filepath.Join(dir, "control")}
	for _, args := range [][]string{{"-x", d.path, d.root}, {"-e", d.path, d.control}} {
		if out, err := exec.Command(dpkgDeb, args...).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return d
}

func (d deb) field(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("dpkg-deb", "-f", d.path, name).Output()
	if err != nil {
		t.Fatalf("dpkg-deb -f %s %s: %v", d.path, name, err)
	}
	return strings.TrimSpace(string(out))
}

// TestDeb builds one package and checks it.
func TestDeb(t *testing.T) {
	d := buildDeb(t)
	t.Run("contents", d.testContents)
	t.Run("control", d.testControl)
	t.Run("unit paths", d.testUnitPaths)
	t.Run("example configuration", d.testExampleConfiguration)
}

func (d deb) testContents(t *testing.T) {
	out, err := exec.Command("dpkg-deb", "-c", d.path).Output()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v", err)
	}
	modes := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// -rw-r--r-- root/root 934 2026-11-28 17:01 ./usr/share/...
		f := strings.Fields(line)
		if len(f) != 6 {
			t.Fatalf("dpkg-deb -c line %q", line)
		}
		if f[1] != "root/root" {
			t.Errorf("%s is owned by %s, want root/root", f[5], f[1])
		}
		modes[strings.TrimPrefix(f[5], ".")] = f[0]
	}
	for path, mode := range packaged {
		if modes[path] != mode {
			t.Errorf("%s: mode %q, want %q", path, modes[path], mode)
		}
	}
	// What dist/ ships arrives unchanged.
	for _, f := range []string{"nvmeof-tgt-alerts.yml", "prometheus-scrape.yml", "grafana-dashboard.json"} {
		sameFile(t, f, filepath.Join(d.root, "usr/share/nvmeof-tgt", f))
	}
	sameFile(t, "../config/examples/single-file.yaml", filepath.Join(d.root, conffile))

	conffiles := readFile(t, filepath.Join(d.control, "conffiles"))
	if conffiles != conffile+"\n" {
		t.Errorf("conffiles: %q, want %q", conffiles, conffile+"\n")
	}
}

func (d deb) testControl(t *testing.T) {
	arch, err := exec.Command("dpkg", "--print-architecture").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := d.field(t, "Version")
	want := map[string]string{"Package": "nvmeof-tgt", "Architecture": strings.TrimSpace(string(arch))}
	for name, value := range want {
		if got := d.field(t, name); got != value {
			t.Errorf("%s: %q, want %q", name, got, value)
		}
	}
	if !regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`).MatchString(version) {
		t.Errorf("Version %q is no Debian upstream version", version)
	}
	if base := filepath.Base(d.path); base != "nvmeof-tgt_"+version+"_"+want["Architecture"]+".deb" {
		t.Errorf("built %s for version %s", base, version)
	}
	// The stand-in links the C library only.
	if got := d.field(t, "Depends"); got != "libc6" {
		t.Errorf("Depends of a package of /usr/bin/true: %q, want libc6", got)
	}

	// Installing makes systemd see the unit and nothing more: the
	// example's address needs editing before the daemon can start.
	postinst := readFile(t, filepath.Join(d.control, "postinst"))
	if !strings.Contains(postinst, "systemctl daemon-reload") {
		t.Errorf("postinst does not reload systemd:\n%s", postinst)
	}
	for _, verb := range []string{"start", "enable", "restart"} {
		if strings.Contains(postinst, "systemctl "+verb) {
			t.Errorf("postinst runs systemctl %s:\n%s", verb, postinst)
		}
	}
	if prerm := readFile(t, filepath.Join(d.control, "prerm")); !strings.Contains(prerm, "systemctl stop nvmeof-tgt.service") {
		t.Errorf("prerm does not stop the daemon:\n%s", prerm)
	}
}

// testUnitPaths: every command the packaged unit runs is the packaged
// binary, and the file it checks and serves is the packaged conffile.
func (d deb) testUnitPaths(t *testing.T) {
	unit := readFile(t, filepath.Join(d.root, "lib/systemd/system/nvmeof-tgt.service"))
	var execs []string
	for _, line := range strings.Split(unit, "\n") {
		if strings.HasPrefix(line, "Exec") {
			execs = append(execs, line)
		}
	}
	want := []string{
		"ExecStartPre=" + binary + " -check -config " + conffile,
		"ExecStart=" + binary + " -config " + conffile,
		"ExecReload=" + binary + " ctl reload",
	}
	if !slices.Equal(execs, want) {
		t.Errorf("the packaged unit runs\n%s\nwant\n%s", strings.Join(execs, "\n"), strings.Join(want, "\n"))
	}
}

// testExampleConfiguration: the conffile passes what `nvmeof-tgt
// -check` runs (config.Load), without a warning.
func (d deb) testExampleConfiguration(t *testing.T) {
	c, err := config.Load(filepath.Join(d.root, conffile))
	if err != nil {
		t.Fatalf("%s: %v", conffile, err)
	}
	if len(c.Ports) == 0 || len(c.Subsystems) == 0 {
		t.Fatalf("%s serves nothing: %d ports, %d subsystems", conffile, len(c.Ports), len(c.Subsystems))
	}
	for _, w := range c.Warnings() {
		t.Errorf("%s: -check warns: %s", conffile, w)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sameFile(t *testing.T, want, got string) {
	t.Helper()
	if readFile(t, want) != readFile(t, got) {
		t.Errorf("%s differs from %s", got, want)
	}
}
