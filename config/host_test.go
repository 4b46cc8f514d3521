package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/dhchap"
	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"
)

// Keys in the form `nvme gen-dhchap-key` prints (these are test keys).
const (
	testKey  = "DHHC-1:01:ICcuNTxDSlFYX2ZtdHuCiZCXnqWss7rByM/W3eTr8vmMpzdS:"
	testKey2 = "DHHC-1:02:MDc+RUxTWmFob3Z9hIuSmaCnrrW8w8rR2N/m7fT7AgkQFx4lLDM6QUhPVl1ka3J51wkKvA==:"
	hostA    = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000000a"
)

func TestHostForms(t *testing.T) {
	y := `
- ` + hostA + `
- nqn: nqn.h2
  dhchap_key: "` + testKey + `"
  dhchap_ctrl_key_file: /etc/nvmeof-tgt/ctrl.key
  dhchap_hashes: [sha384]
  dhchap_dhgroups: [ffdhe8192, ffdhe4096]
`
	var hs []Host
	if err := yaml.Unmarshal([]byte(y), &hs); err != nil {
		t.Fatal(err)
	}
	want := []Host{{NQN: hostA}, {NQN: "nqn.h2", DHCHAPKey: testKey, DHCHAPCtrlKeyFile: "/etc/nvmeof-tgt/ctrl.key",
		DHCHAPHashes: []string{"sha384"}, DHCHAPDHGroups: []string{"ffdhe8192", "ffdhe4096"}}}
	if len(hs) != 2 || !hs[0].Equal(want[0]) || !hs[1].Equal(want[1]) {
		t.Fatalf("%+v", hs)
	}
	// A plain NQN stays a plain string in YAML and JSON.
	out, _ := yaml.Marshal(hs)
	if !strings.Contains(string(out), "- "+hostA+"\n") || !strings.Contains(string(out), "dhchap_ctrl_key_file: /etc/nvmeof-tgt/ctrl.key") {
		t.Fatalf("yaml:\n%s", out)
	}
	j, _ := json.Marshal(hs)
	if !strings.HasPrefix(string(j), `["`+hostA+`",{"nqn":"nqn.h2"`) {
		t.Fatalf("json: %s", j)
	}
	var back []Host
	if err := json.Unmarshal(j, &back); err != nil || !back[0].Equal(want[0]) || !back[1].Equal(want[1]) {
		t.Fatalf("json round trip: %+v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`[{"nqn":"nqn.h","dhchap_secret":"x"}]`), &back); err == nil {
		t.Fatal("JSON host with an unknown key accepted")
	}
	// Unknown keys in the object form are errors, as everywhere.
	if _, err := Parse([]byte("ports: [{id: 1, address: 10.0.0.1}]\nsubsystems:\n- nqn: nqn.a\n  hosts:\n  - {nqn: nqn.h, dhchap_secret: x}\n")); err == nil ||
		!strings.Contains(err.Error(), "dhchap_secret") {
		t.Fatalf("unknown host key: %v", err)
	}
}

func writeKey(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, mode)
	return p
}

// A host's lists may only narrow its subsystem's.
func TestHostListsNarrow(t *testing.T) {
	cfg := validConfig()
	cfg.Subsystems[0].DHCHAPHashes = []string{"sha384", "sha512"}
	cfg.Subsystems[0].DHCHAPDHGroups = []string{"ffdhe2048"}
	cfg.Subsystems[0].Hosts = []Host{{NQN: hostA, DHCHAPKey: testKey, DHCHAPHashes: []string{"sha512", "sha256"},
		DHCHAPDHGroups: []string{"ffdhe2048"}}}
	err := cfg.Validate()
	want := `subsystems[0].hosts[0].dhchap_hashes[1]: "sha256" is not in the subsystem's dhchap_hashes (sha384, sha512)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	cfg.Subsystems[0].Hosts[0].DHCHAPHashes = []string{"sha512"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestHostKeyValidation(t *testing.T) {
	good := writeKey(t, testKey+"\n", 0o600)
	open := writeKey(t, testKey, 0o644)
	bad := writeKey(t, "DHHC-1:01:ICcuNTxDSlFYX2ZtdHuCiZCXnqWss7rByM/W3eTr8vmMpzdT:", 0o600)
	for _, c := range []struct {
		name string
		h    Host
		want string
	}{
		{"inline", Host{NQN: hostA, DHCHAPKey: testKey, DHCHAPCtrlKey: testKey2}, ""},
		{"file", Host{NQN: hostA, DHCHAPKeyFile: good, DHCHAPCtrlKeyFile: good}, ""},
		{"crc", Host{NQN: hostA, DHCHAPKey: strings.Replace(testKey, "ICcu", "ICcv", 1)}, "subsystems[0].hosts[0].dhchap_key: DHHC-1 secret: CRC mismatch"},
		{"length", Host{NQN: hostA, DHCHAPKey: "DHHC-1:01:AAAA:"}, "subsystems[0].hosts[0].dhchap_key: DHHC-1 secret: the key must be 32, 48 or 64 bytes"},
		{"transform", Host{NQN: hostA, DHCHAPCtrlKey: "DHHC-1:07:" + testKey[10:], DHCHAPKey: testKey}, "subsystems[0].hosts[0].dhchap_ctrl_key: DHHC-1 secret: NN"},
		{"base64", Host{NQN: hostA, DHCHAPKey: "DHHC-1:00:@@@@:"}, "subsystems[0].hosts[0].dhchap_key: DHHC-1 secret: the key is not valid base64"},
		{"format", Host{NQN: hostA, DHCHAPKey: "hunter2"}, "subsystems[0].hosts[0].dhchap_key: not a DHHC-1 secret"},
		{"both", Host{NQN: hostA, DHCHAPKey: testKey, DHCHAPKeyFile: good}, "subsystems[0].hosts[0].dhchap_key: set dhchap_key or dhchap_key_file, not both"},
		{"file mode", Host{NQN: hostA, DHCHAPKeyFile: open}, "subsystems[0].hosts[0].dhchap_key_file: " + open + " is readable or writable by others (mode 0644): chmod 600 it"},
		{"file crc", Host{NQN: hostA, DHCHAPKeyFile: bad}, "subsystems[0].hosts[0].dhchap_key_file: " + bad + ": DHHC-1 secret: CRC mismatch"},
		{"file missing", Host{NQN: hostA, DHCHAPKeyFile: "/nonexistent/key"}, "subsystems[0].hosts[0].dhchap_key_file: open /nonexistent/key"},
		{"file relative", Host{NQN: hostA, DHCHAPKeyFile: "key"}, `subsystems[0].hosts[0].dhchap_key_file: "key" is not an absolute path`},
		{"ctrl alone", Host{NQN: hostA, DHCHAPCtrlKey: testKey}, "subsystems[0].hosts[0].dhchap_ctrl_key: a controller key needs a host key"},
		{"redacted", Host{NQN: hostA, DHCHAPKey: Redacted}, "subsystems[0].hosts[0].dhchap_key: the secret was redacted when this file was saved"},
		{"bad nqn", Host{NQN: "a b", DHCHAPKey: testKey}, `subsystems[0].hosts[0].nqn: "a b" must be printable`},
		{"host lists", Host{NQN: hostA, DHCHAPKey: testKey, DHCHAPHashes: []string{"sha512"}, DHCHAPDHGroups: []string{"ffdhe8192", "null"}}, ""},
		{"host hash", Host{NQN: hostA, DHCHAPKey: testKey, DHCHAPHashes: []string{"md5"}}, `subsystems[0].hosts[0].dhchap_hashes[0]: unknown "md5"`},
		{"host group twice", Host{NQN: hostA, DHCHAPKey: testKey, DHCHAPDHGroups: []string{"null", "null"}}, `subsystems[0].hosts[0].dhchap_dhgroups[1]: "null" is listed twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := validConfig()
			cfg.Subsystems[0].Hosts = []Host{c.h}
			err := cfg.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want %s…", err, c.want)
			}
			if strings.Contains(err.Error(), testKey[10:30]) {
				t.Fatalf("error repeats the secret: %v", err)
			}
		})
	}
}

func TestAuthPolicyValidation(t *testing.T) {
	cfg := validConfig()
	cfg.Subsystems[0].DHCHAPHashes = []string{"sha512", "md5", "sha512"}
	cfg.Subsystems[0].DHCHAPDHGroups = []string{"ffdhe1024"}
	want := `subsystems[0].dhchap_hashes[1]: unknown "md5" (want sha256, sha384, sha512)
subsystems[0].dhchap_hashes[2]: "sha512" is listed twice
subsystems[0].dhchap_dhgroups[0]: unknown "ffdhe1024" (want null, ffdhe2048, ffdhe3072, ffdhe4096, ffdhe6144, ffdhe8192)`
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

func TestRedact(t *testing.T) {
	cfg := validConfig()
	cfg.Subsystems[0].Hosts = []Host{{NQN: hostA}, {NQN: "nqn.b", DHCHAPKey: testKey, DHCHAPCtrlKeyFile: "/k"},
		{NQN: "nqn.c", DHCHAPKeyFile: "/k2", DHCHAPCtrlKey: testKey2}}
	red, n := cfg.Redact()
	if n != 2 {
		t.Fatalf("%d redacted", n)
	}
	out, err := Marshal(red)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Contains(s, "DHHC-1") || !strings.Contains(s, "dhchap_ctrl_key_file: /k\n") || !strings.Contains(s, "dhchap_key_file: /k2\n") ||
		strings.Count(s, Redacted) != 2 || !strings.Contains(s, "- "+hostA+"\n") {
		t.Fatalf("%s", s)
	}
	if cfg.Subsystems[0].Hosts[1].DHCHAPKey != testKey {
		t.Fatal("Redact changed the original")
	}
}

// Key files are checked as opened, so that the file read is the file
// checked: links, FIFOs, devices, other owners and huge files are refused,
// and none of them blocks the read.
func TestKeyFileKinds(t *testing.T) {
	good := writeKey(t, testKey+"\n", 0o600)
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := writeKey(t, testKey+strings.Repeat("\n", maxKeyFileSize), 0o600)
	other := writeKey(t, testKey, 0o600)
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatalf("chown (the test runs as root to give a file away): %v", err)
	}
	for _, c := range []struct{ name, path, want string }{
		{"symlink", link, link + " is a symbolic link"},
		{"fifo", fifo, fifo + " is not a regular file"},
		{"directory", dir, dir + " is not a regular file"},
		{"device", "/dev/zero", "/dev/zero is not a regular file"},
		{"too large", big, big + " is larger than a secret"},
		{"other owner", other, other + " is owned by uid 65534"},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := readKeyFileAs(c.path, dhchap.ParseSecret); done <- err }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("reading the key file blocked")
			}
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("got %v, want %s…", err, c.want)
			}
		})
	}
	if _, err := readKeyFileAs(good, dhchap.ParseSecret); err != nil {
		t.Fatal(err)
	}
}
