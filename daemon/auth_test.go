package daemon

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/dhchap"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Test keys in the form `nvme gen-dhchap-key` prints.
const (
	key1 = "DHHC-1:01:ICcuNTxDSlFYX2ZtdHuCiZCXnqWss7rByM/W3eTr8vmMpzdS:"
	key2 = "DHHC-1:02:MDc+RUxTWmFob3Z9hIuSmaCnrrW8w8rR2N/m7fT7AgkQFx4lLDM6QUhPVl1ka3J51wkKvA==:"
	key3 = "DHHC-1:00:+fLr5N3Wz8jBurOspZ6XkImCe3RtZl9YUUpDPDUuJyDcYFZX:"
)

func mustSecret(t *testing.T, s string) *dhchap.Secret {
	t.Helper()
	sec, err := dhchap.ParseSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// Keys come in through the admin socket, reach the target, never come
// back out in clear, and change without dropping anyone.
func TestAPIHostKeys(t *testing.T) {
	_, dir, d := startBase(t)
	c := pipeClient(t, api.NewHandler(d, "", Version, d.log))
	keyFile := filepath.Join(dir, "x.key")
	os.WriteFile(keyFile, []byte(key2+"\n"), 0o600)
	s := d.target.Subsystem(nqnA)

	var raw json.RawMessage
	if err := c.Call("add_host", api.HostParams{NQN: nqnA, Host: hostX, DHCHAPKey: key1, DHCHAPCtrlKeyFile: keyFile}, &raw); err != nil {
		t.Fatal(err)
	}
	if !s.HasHostKeys(hostX, fabrics.HostKeys{Host: mustSecret(t, key1), Ctrl: mustSecret(t, key2)}) {
		t.Fatal("the target does not hold the keys given")
	}
	if err := c.Call("add_host", api.HostParams{NQN: nqnA, Host: hostY}, &raw); err != nil {
		t.Fatal(err)
	}
	checkStateHidesKeys(t, c)

	// set_host replaces the keys; the host needs none once they are gone.
	if err := c.Call("set_host", api.HostParams{NQN: nqnA, Host: hostX, DHCHAPKeyFile: keyFile}, &raw); err != nil {
		t.Fatal(err)
	}
	if !s.HasHostKeys(hostX, fabrics.HostKeys{Host: mustSecret(t, key2)}) {
		t.Fatal("set_host did not take")
	}
	// A bad key is refused with its field, and changes nothing.
	err := c.Call("set_host", api.HostParams{NQN: nqnA, Host: hostX, DHCHAPKey: key1[:20] + ":"}, &raw)
	if re, ok := err.(*api.Error); !ok || re.Code != api.CodeValidationFailed || re.Data.Field != "subsystems[0].hosts[0].dhchap_key" ||
		strings.Contains(re.Message, key1[10:20]) {
		t.Fatalf("bad key: %v", err)
	}
	if !s.HasHostKeys(hostX, fabrics.HostKeys{Host: mustSecret(t, key2)}) {
		t.Fatal("a refused change changed the keys")
	}
	if err := c.Call("set_host", api.HostParams{NQN: nqnA, Host: hostY, DHCHAPKey: key3, DHCHAPCtrlKey: key1}, &raw); err != nil {
		t.Fatal(err)
	}

	checkSaveRedactsKeys(t, c, keyFile)
	// The running configuration still has them.
	if !s.HasHostKeys(hostY, fabrics.HostKeys{Host: mustSecret(t, key3), Ctrl: mustSecret(t, key1)}) {
		t.Fatal("redaction touched the running keys")
	}
	if err := c.Call("set_host", api.HostParams{NQN: nqnA, Host: hostX}, &raw); err != nil {
		t.Fatal(err)
	}
	if s.AuthRequired(hostX) {
		t.Fatal("keys cleared, authentication still required")
	}
	checkCtlSetsHostPolicy(t, d)
}

// checkStateHidesKeys checks that get_state names a's one host with keys,
// hostX, and shows no key.
func checkStateHidesKeys(t *testing.T, c *api.Client) {
	t.Helper()
	var st api.State
	if err := c.Call("get_state", nil, &st); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(st)
	if strings.Contains(string(b), "DHHC-1") || len(st.Subsystems[0].DHCHAPHosts) != 1 || st.Subsystems[0].DHCHAPHosts[0] != hostX {
		t.Fatalf("state: %s", b)
	}
}

// checkSaveRedactsKeys checks that save_config writes the file reference
// keyFile, redacts the two inline keys and says so, and that the file it
// writes does not load until they are put back.
func checkSaveRedactsKeys(t *testing.T, c *api.Client, keyFile string) {
	t.Helper()
	var saved api.SaveResult
	if err := c.Call("save_config", nil, &saved); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(saved.YAML, "DHHC-1") || !strings.Contains(saved.YAML, "dhchap_key_file: "+keyFile) ||
		saved.Redacted != 2 || strings.Count(saved.YAML, config.Redacted) != 2 || !strings.Contains(saved.Note, "2 inline") {
		t.Fatalf("saved (%d redacted, note %q):\n%s", saved.Redacted, saved.Note, saved.YAML)
	}
	if _, err := config.Parse([]byte(saved.YAML)); err == nil || !strings.Contains(err.Error(), "redacted when this file was saved") {
		t.Fatalf("loading the redacted file: %v", err)
	}
}

// checkCtlSetsHostPolicy checks that ctl set host gives hostX of a its own
// hash and group lists, and that an unknown hash is refused and changes
// nothing.
func checkCtlSetsHostPolicy(t *testing.T, d *Daemon) {
	t.Helper()
	s := d.target.Subsystem(nqnA)
	if err := control(d, "", []string{"set", "host", nqnA, hostX, "-dhchap-key", key1,
		"-dhchap-hashes", "sha512,sha384", "-dhchap-dhgroups", "ffdhe8192"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	want := fabrics.HostKeys{Host: mustSecret(t, key1), Policy: fabrics.AuthPolicy{
		Hashes: []uint8{dhchap.HashByName("sha512"), dhchap.HashByName("sha384")}, DHGroups: []uint8{nvme.DHGroup8192}}}
	if !s.HasHostKeys(hostX, want) {
		t.Fatal("set host with -dhchap-hashes and -dhchap-dhgroups did not take")
	}
	err := control(d, "", []string{"set", "host", nqnA, hostX, "-dhchap-key", key1, "-dhchap-hashes", "hmac(sha512)"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `dhchap_hashes[0]: unknown "hmac(sha512)"`) {
		t.Fatalf("unknown hash: %v", err)
	}
	if !s.HasHostKeys(hostX, want) {
		t.Fatal("a refused change changed the host's lists")
	}
}

// A reload reads key files again, so rotating a key is writing the file
// and reloading, with the configuration unchanged.
func TestReloadRotatesKeyFile(t *testing.T) {
	_, dir, d := startBase(t)
	keyFile := filepath.Join(dir, "x.key")
	os.WriteFile(keyFile, []byte(key1), 0o600)
	path := filepath.Join(dir, "tgt.yaml")
	cfg := baseConfig(dir, "") + "    hosts: [{nqn: " + hostX + ", dhchap_key_file: " + keyFile + "}]\n    dhchap_hashes: [sha512]\n"
	os.WriteFile(path, []byte(cfg), 0o600)
	if err := d.Reload(path); err != nil {
		t.Fatal(err)
	}
	s := d.target.Subsystem(nqnB)
	if !s.HasHostKeys(hostX, fabrics.HostKeys{Host: mustSecret(t, key1)}) {
		t.Fatal("key file not read")
	}
	os.WriteFile(keyFile, []byte(key3), 0o600)
	if err := d.Reload(path); err != nil {
		t.Fatal(err)
	}
	if !s.HasHostKeys(hostX, fabrics.HostKeys{Host: mustSecret(t, key3)}) {
		t.Fatal("the rotated key file was not read again")
	}
	// A key file that became readable by others is refused by the reload.
	os.Chmod(keyFile, 0o644)
	if err := d.Reload(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("reload with an open key file: %v", err)
	}
}
