package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestStoreAndSetArgs(t *testing.T) {
	var h host
	for _, c := range []struct{ name, v string }{
		{"dhchap_key", "K"}, {"dhchap_ctrl_key", "C"}, {"dhchap_hash", "hmac(sha384)"}, {"dhchap_dhgroup", "ffdhe8192"},
	} {
		var ok bool
		if h, ok = h.store(c.name, c.v); !ok {
			t.Fatalf("store %s %q refused", c.name, c.v)
		}
		if got := h.show(c.name); got != c.v {
			t.Errorf("show %s = %q, want %q", c.name, got, c.v)
		}
	}
	want := "set host S H -dhchap-key K -dhchap-ctrl-key C -dhchap-hashes sha384 -dhchap-dhgroups ffdhe8192"
	if got := strings.Join(h.setArgs("S", "H"), " "); got != want {
		t.Errorf("setArgs = %q, want %q", got, want)
	}
	for _, c := range []struct{ name, v string }{
		{"dhchap_hash", "sha384"}, {"dhchap_hash", "hmac(md5)"}, {"dhchap_hash", ""},
		{"dhchap_dhgroup", "ffdhe1024"}, {"dhchap_dhgroup", "modp2048"}, {"dhchap_dhgroup", ""},
	} {
		if _, ok := h.store(c.name, c.v); ok {
			t.Errorf("store %s %q taken, want refused", c.name, c.v)
		}
	}
	var fresh host
	if got := strings.Join(fresh.setArgs("S", "H"), " "); got != "set host S H" {
		t.Errorf("setArgs of a fresh host = %q: it must restrict nothing", got)
	}
}

// needFUSE skips without root or /dev/fuse, unless NVMEOF_REQUIRE_TOOLS
// (test/run-tests.sh) asks for every test to run.
func needFUSE(t *testing.T) {
	t.Helper()
	why := ""
	if _, err := os.Stat("/dev/fuse"); err != nil {
		why = "no /dev/fuse (modprobe fuse)"
	} else if os.Geteuid() != 0 {
		why = "mounting with mount(2) needs root"
	}
	if why == "" {
		return
	}
	if os.Getenv("NVMEOF_REQUIRE_TOOLS") != "" {
		t.Fatalf("cannot mount FUSE: %s", why)
	}
	t.Skipf("NOT RUN: cannot mount FUSE: %s; test/run-tests.sh requires it", why)
}

// mountStub mounts the shim on stub, the daemon it runs.
func mountStub(t *testing.T) *shim {
	needFUSE(t)
	tmp := t.TempDir()
	tgt := filepath.Join(tmp, "nvmeof-tgt")
	if err := os.WriteFile(tgt, []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	logf := filepath.Join(tmp, "log")
	calls := func() []string {
		b, _ := os.ReadFile(logf)
		os.Remove(logf)
		if s := strings.TrimSpace(string(b)); s != "" {
			return strings.Split(s, "\n")
		}
		return nil
	}
	return mountShim(t, &cfs{tgt: tgt}, calls)
}

// stub is an nvmeof-tgt that logs each call, answers `ctl list -json`
// with subsystems s1 (host h1) and s2 (hosts h1, h2), and refuses a call
// on s2 that carries the key BAD.
const stub = `#!/bin/bash
echo "$*" >>"$(dirname "$0")/log"
case "$*" in
"ctl list -json") echo '{"generation":1,"ports":[],"subsystems":[{"nqn":"s1","hosts":["h1"]},{"nqn":"s2","hosts":["h1","h2"]}]}' ;;
"ctl set host s2 "*BAD*) echo "nvmeof-tgt ctl: subsystems[1].hosts[0].dhchap_ctrl_key: bad" >&2; exit 1 ;;
"ctl set host "*) ;;
*) echo "stub: unexpected call: $*" >&2; exit 2 ;;
esac
`

func TestMount(t *testing.T) {
	sh := mountStub(t)
	ls, read, write, expect := sh.names, sh.readRaw, sh.write, sh.expect

	if got := ls(""); !slices.Equal(got, []string{"hosts", "ports", "subsystems"}) {
		t.Errorf("top level %v", got)
	}
	if err := sh.mkdir("hosts/h1"); err != nil {
		t.Fatal(err)
	}
	if got := ls("hosts/h1"); !slices.Equal(got, []string{"dhchap_ctrl_key", "dhchap_dhgroup", "dhchap_hash", "dhchap_key"}) {
		t.Errorf("hosts/h1 has %v", got)
	}
	for p, want := range map[string]string{"dhchap_key": "\n", "dhchap_ctrl_key": "\n", "dhchap_hash": "hmac(sha256)\n", "dhchap_dhgroup": "null\n"} {
		if got := read("hosts/h1/" + p); got != want {
			t.Errorf("fresh %s reads %q, want %q", p, got, want)
		}
	}
	expect("mkdir", nil, nil)

	set := "ctl set host %s h1 -dhchap-key K1"
	on := func(f string, subs ...string) []string {
		out := []string{"ctl list -json"}
		for _, s := range subs {
			out = append(out, strings.Replace(f, "%s", s, 1))
		}
		return out
	}
	expect("host key", write("hosts/h1/dhchap_key", "K1\n"), nil, on(set, "s1", "s2")...)
	if got := read("hosts/h1/dhchap_key"); got != "K1\n" {
		t.Errorf("dhchap_key reads %q", got)
	}
	set += " -dhchap-hashes sha512"
	expect("hash", write("hosts/h1/dhchap_hash", "hmac(sha512)"), nil, on(set, "s1", "s2")...)
	set += " -dhchap-dhgroups ffdhe2048"
	expect("DH group", write("hosts/h1/dhchap_dhgroup", "ffdhe2048\n"), nil, on(set, "s1", "s2")...)
	expect("bad hash", write("hosts/h1/dhchap_hash", "hmac(md5)\n"), syscall.EINVAL)
	expect("bad DH group", write("hosts/h1/dhchap_dhgroup", "ffdhe1024\n"), syscall.EINVAL)

	// s2 refuses: s1 gets the change, then goes back.
	bad := strings.Replace(set, "-dhchap-hashes", "-dhchap-ctrl-key BAD -dhchap-hashes", 1)
	expect("refused controller key", write("hosts/h1/dhchap_ctrl_key", "BAD\n"), syscall.EINVAL,
		"ctl list -json", strings.Replace(bad, "%s", "s1", 1), strings.Replace(bad, "%s", "s2", 1), strings.Replace(set, "%s", "s1", 1))
	if got := read("hosts/h1/dhchap_ctrl_key"); got != "\n" {
		t.Errorf("a refused controller key reads %q, want it unchanged", got)
	}
	withCtrl := strings.Replace(set, "-dhchap-hashes", "-dhchap-ctrl-key C1 -dhchap-hashes", 1)
	expect("controller key", write("hosts/h1/dhchap_ctrl_key", "C1"), nil, on(withCtrl, "s1", "s2")...)
	expect("truncate", os.Truncate(sh.path("hosts/h1/dhchap_ctrl_key"), 0), nil)
	expect("empty controller key", write("hosts/h1/dhchap_ctrl_key", "\n"), nil, on(set, "s1", "s2")...)

	if err := sh.mkdir("hosts/h3"); err != nil {
		t.Fatal(err)
	}
	expect("host on no subsystem", write("hosts/h3/dhchap_key", "K3"), nil, "ctl list -json")

	if err := os.Remove(sh.path("hosts/h1")); err != nil {
		t.Fatalf("rmdir hosts/h1: %v", err)
	}
	if got := ls("hosts"); !slices.Equal(got, []string{"h3"}) {
		t.Errorf("after rmdir hosts/h1, hosts has %v", got)
	}
	if err := sh.mkdir("hosts/h1"); err != nil {
		t.Fatal(err)
	}
	if got := read("hosts/h1/dhchap_key"); got != "\n" {
		t.Errorf("a host made again reads key %q, want none", got)
	}
	expect("host made again", write("hosts/h1/dhchap_key", "K1"), nil, on("ctl set host %s h1 -dhchap-key K1", "s1", "s2")...)
	if err := sh.mkdir("ports/1"); err == nil {
		t.Error("mkdir ports/1 succeeded: ports are the daemon's")
	}
}
