package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sharedYAML = `
ceph: {conf: /etc/ceph/ceph.conf, user: nvmeof, keyring: /etc/ceph/nvmeof.keyring}
gateway:
  name: gw-a
  pool: rbd
  groups: [1]
  shared_config: true
  cntlid_min: 100
  cntlid_max: 199
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - nqn: nqn.2026-11.io.example:rbd
    serial: PAIR1
    cntlid_min: 1
    cntlid_max: 99
    hosts: [nqn.2014-08.org.nvmexpress:uuid:plain, {nqn: nqn.2014-08.org.nvmexpress:uuid:k, dhchap_key: '` + testKey + `', dhchap_ctrl_key: '` + testKey2 + `'}]
    namespaces:
      - {nsid: 1, backend: rbd, pool: rbd, image: vol1, uuid: 2b1f4c0e-8d0a-4c35-9d8e-0c6f1c1e5a01, qos: {iops: 1000}}
`

var groupKey = bytes.Repeat([]byte{7}, 32)

// The shared part goes through the object and back: the secrets sealed
// in it, the controller IDs this gateway's own.
func TestSharedRoundTrip(t *testing.T) {
	c, err := Parse([]byte(sharedYAML))
	if err != nil {
		t.Fatal(err)
	}
	data, err := MarshalShared(Shared{Version: 3, Subsystems: c.Shared()}, groupKey)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(testKey)) || bytes.Contains(data, []byte(testKey2)) || !bytes.Contains(data, []byte("sealed:")) {
		t.Fatalf("the secrets are not sealed in the object:\n%s", data)
	}
	if bytes.Contains(data, []byte("cntlid")) || bytes.Contains(data, []byte("nvmeof.keyring")) {
		t.Fatalf("the object carries this gateway's controller IDs or cluster connection:\n%s", data)
	}
	s, err := ParseShared(data, groupKey)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != 3 {
		t.Fatalf("version %d", s.Version)
	}
	b := c.WithShared(s.Subsystems)
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	sub := b.Subsystems[0]
	if sub.CntlidMin != 100 || sub.CntlidMax != 199 {
		t.Fatalf("controller IDs %d..%d, want the gateway's 100..199", sub.CntlidMin, sub.CntlidMax)
	}
	if h := sub.Hosts[1]; h.DHCHAPKey != testKey || h.DHCHAPCtrlKey != testKey2 {
		t.Fatalf("secrets after the round trip: %+v", h)
	}
	if sub.Namespaces[0].QoS.IOPS != 1000 || sub.Hosts[0].NQN != "nqn.2014-08.org.nvmexpress:uuid:plain" {
		t.Fatalf("lost on the way: %+v", sub)
	}
}

func TestSharedSecretsNeedTheKey(t *testing.T) {
	c, err := Parse([]byte(sharedYAML))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MarshalShared(Shared{Subsystems: c.Shared()}, nil); err == nil || !strings.Contains(err.Error(), "secret_key_file") {
		t.Fatalf("inline secrets without a key: %v", err)
	}
	data, err := MarshalShared(Shared{Subsystems: c.Shared()}, groupKey)
	if err != nil {
		t.Fatal(err)
	}
	other := bytes.Repeat([]byte{8}, 32)
	if _, err := ParseShared(data, other); err == nil || !strings.Contains(err.Error(), "same gateway.secret_key_file") {
		t.Fatalf("another key: %v", err)
	}
	if _, err := ParseShared(data, nil); err == nil {
		t.Fatal("no key opened a sealed secret")
	}
	// A sealed secret moved to another host does not open.
	moved := bytes.Replace(data, []byte("uuid:k"), []byte("uuid:x"), 1)
	if _, err := ParseShared(moved, groupKey); err == nil {
		t.Fatal("a secret moved to another host opened")
	}
	// A secret written in clear by hand is refused, not used.
	clear := bytes.Replace(data, []byte("dhchap_key: sealed:"), []byte("dhchap_key: plain"), 1)
	if _, err := ParseShared(clear, groupKey); err == nil || !strings.Contains(err.Error(), "in clear") {
		t.Fatalf("a secret in clear: %v", err)
	}
}

func TestSharedConfigSettings(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{"  cntlid_min: 100\n", "", "gateway.cntlid_min: required with shared_config"},
		{"  cntlid_max: 199\n", "  cntlid_max: 50\n", "gateway.cntlid_max: 100..50 is not a range"},
		{"  shared_config: true\n", "", "gateway.shared_config: cntlid_min, cntlid_max and secret_key_file apply to a shared configuration only"},
		{"  cntlid_max: 199\n", "  cntlid_max: 199\n  secret_key_file: key\n", `gateway.secret_key_file: "key" is not an absolute path`},
	} {
		_, err := Parse([]byte(strings.Replace(sharedYAML, tc.old, tc.new, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q -> %q: %v, want %q", tc.old, tc.new, err, tc.want)
		}
	}
}

func TestReadSecretKey(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "group.key")
	os.WriteFile(p, []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
	if k, err := ReadSecretKey(p); err != nil || len(k) != 32 || k[0] != 0xab {
		t.Fatalf("%x, %v", k, err)
	}
	os.WriteFile(p, []byte("abcd\n"), 0o600)
	if _, err := ReadSecretKey(p); err == nil || !strings.Contains(err.Error(), "32 bytes in hex") {
		t.Fatalf("a short key: %v", err)
	}
	os.Chmod(p, 0o644)
	if _, err := ReadSecretKey(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a key others read: %v", err)
	}
}
