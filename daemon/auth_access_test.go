package daemon

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/ctl"
	"github.com/nvmeof-tgt/nvmeof-tgt/dhchap"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/tlspsk"
)

// connectAs sends an admin Connect for hostNQN over the loop transport
// and returns its completion.
func connectAs(t *testing.T, d *Daemon, subNQN, hostNQN string) nvme.Completion {
	t.Helper()
	h := &loopHost{t: t, admin: fabrics.NewLoopQueue(d.target, d.target.Port(1), 0, 32)}
	t.Cleanup(h.admin.Close)
	c := loopCmd(nvme.OpFabrics, nvme.ConnectDataSize)
	c.SetConnect(0, 31, 0)
	b := make([]byte, nvme.ConnectDataSize)
	nvme.ConnectData{HostID: [16]byte{7}, CNTLID: nvme.ControllerIDDynamic, SubNQN: subNQN, HostNQN: hostNQN}.Encode(b)
	return h.submit(c, b)
}

// hookSecrets runs during each read of a host's secrets.
func hookSecrets(t *testing.T, during func(h config.Host) error) {
	orig := readHostSecrets
	t.Cleanup(func() { readHostSecrets = orig })
	readHostSecrets = func(h config.Host) (*dhchap.Secret, *dhchap.Secret, error) {
		if err := during(h); err != nil {
			return nil, nil, err
		}
		return orig(h)
	}
}

// A host added with a secret is never allowed without it: a Connect made
// while add_host reads the key file is refused, not given a controller
// that needs no authentication.
func TestAddHostWithKeyNoWindow(t *testing.T) {
	_, dir, d := startBase(t)
	if err := d.Reload(writeConfig(t, dir, "    hosts: ["+hostY+"]\n", false)); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "x.key")
	os.WriteFile(keyFile, []byte(key1), 0o600)
	var during []nvme.Completion
	hookSecrets(t, func(h config.Host) error {
		if h.NQN == hostX {
			during = append(during, connectAs(t, d, nqnB, hostX))
		}
		return nil
	})
	if err := control(d, "", []string{"add", "host", nqnB, hostX, "-dhchap-key-file", keyFile}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if len(during) == 0 {
		t.Fatal("the key file was never read")
	}
	for _, rsp := range during {
		if rsp.Status() == 0 && rsp.Result()&nvme.ConnectAuthReqATR == 0 {
			t.Fatalf("a Connect while the key was read got a controller without authentication (result %#x)", rsp.Result())
		}
	}
	if rsp := connectAs(t, d, nqnB, hostX); rsp.Status() != 0 || rsp.Result()&nvme.ConnectAuthReqATR == 0 {
		t.Fatalf("connect after add_host: %v, result %#x", rsp.Status(), rsp.Result())
	}
}

// A key that cannot be read when a change applies refuses its host, even
// under allow_any_host, where leaving it off the allow-list does nothing.
func TestUnreadableKeyRefusesUnderAllowAnyHost(t *testing.T) {
	_, dir, d := startBase(t)
	keyFile := filepath.Join(dir, "x.key")
	os.WriteFile(keyFile, []byte(key1), 0o600)
	hookSecrets(t, func(h config.Host) error {
		if h.NQN == hostX {
			return errors.New("dhchap_key_file: gone")
		}
		return nil
	})
	path := writeConfig(t, dir, "    hosts: [{nqn: "+hostX+", dhchap_key_file: "+keyFile+"}]\n", true)
	d.Reload(path) // the problem is reported; what matters is what the target does
	s := d.target.Subsystem(nqnB)
	if rsp := connectAs(t, d, nqnB, hostX); rsp.Status() != nvme.StatusConnectInvalidHost|nvme.DNR {
		t.Fatalf("connect of a host whose key could not be read, allow_any_host: %v, result %#x", rsp.Status(), rsp.Result())
	}
	if n := s.Stats.Refused.Counts()[fabrics.RefusedKey{Reason: "host_key_unreadable", Port: 1}]; n != 1 {
		t.Fatalf("refusals %v", s.Stats.Refused.Counts())
	}
	// Other hosts still get in.
	if rsp := connectAs(t, d, nqnB, hostY); rsp.Status() != 0 {
		t.Fatalf("another host: %v", rsp.Status())
	}
}

// writeConfig writes baseConfig with subsystem b's allow_any_host set and
// extra lines for it.
func writeConfig(t *testing.T, dir, extra string, anyHost bool) string {
	t.Helper()
	cfg := baseConfig(dir, "")
	if !anyHost {
		i := strings.LastIndex(cfg, "allow_any_host: true")
		cfg = cfg[:i] + "allow_any_host: false" + cfg[i+len("allow_any_host: true"):]
	}
	path := filepath.Join(dir, "tgt.yaml")
	if err := os.WriteFile(path, []byte(cfg+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ctl takes a secret from standard input with "-", so it never appears in
// the process list.
func TestCtlKeyFromStdin(t *testing.T) {
	_, _, d := startBase(t)
	orig := ctl.Stdin
	t.Cleanup(func() { ctl.Stdin = orig })
	ctl.Stdin = strings.NewReader(key1 + "\n")
	if err := control(d, "", []string{"add", "host", nqnB, hostX, "-dhchap-key", "-"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !d.target.Subsystem(nqnB).HasHostKeys(hostX, fabrics.HostKeys{Host: mustSecret(t, key1)}) {
		t.Fatal("the secret read from standard input did not reach the target")
	}
	ctl.Stdin = strings.NewReader("")
	if err := control(d, "", []string{"set", "host", nqnB, hostX, "-dhchap-key", "-"}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "no secret on standard input") {
		t.Fatalf("empty standard input: %v", err)
	}
}

// ctl list escapes what a remote host chose: its NQN never reaches the
// administrator's terminal raw.
func TestListEscapesHostNQN(t *testing.T) {
	evil := "nqn.evil:\x1b]0;owned\x07\x1b[2J\u009b"
	st := api.State{Subsystems: []api.SubState{{NQN: nqnA, AllowAnyHost: true, Hosts: []string{evil},
		Controllers: []api.CtrlState{{CNTLID: 1, Host: evil, Port: 1}}}}}
	out := ctlList(t, st)
	if strings.ContainsAny(out, "\x1b\x07\u009b") {
		t.Fatalf("raw control characters in ctl list:\n%q", out)
	}
	if !strings.Contains(out, `nqn.evil:\x1b]0;owned\a\x1b[2J\u009b`) {
		t.Fatalf("the NQN is not shown escaped:\n%s", out)
	}
}

// A host's TLS key, given to ctl on standard input, reaches the target:
// the TLS PSK it gives for the host's identity is the one package tlspsk
// derives from that key (whose known answers hold it to libnvme's), none
// for a subsystem where the host has no key, and a second secret on
// standard input is refused.
func TestCtlTLSKeyFromStdin(t *testing.T) {
	const (
		host = "nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6"
		key  = "NVMeTLSkey-1:01:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp28JD1Z:"
	)
	_, _, d := startBase(t)
	orig := ctl.Stdin
	t.Cleanup(func() { ctl.Stdin = orig })
	ctl.Stdin = strings.NewReader(key + "\n")
	if err := control(d, "", []string{"add", "host", nqnB, host, "-tls-key", "-"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	id := "NVMe0R01 " + host + " " + nqnB
	got, err := d.target.TLSPSK(id)
	if err != nil {
		t.Fatalf("TLSPSK(%q): %v", id, err)
	}
	k, err := tlspsk.ParseConfiguredPSK(key)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tlspsk.ServerPSK(k, id, host, nqnB, tlspsk.DerivationRFC8446)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the target's TLS PSK %x, want %x (%v)", got, want, err)
	}
	if _, err := d.target.TLSPSK("NVMe0R01 " + host + " " + nqnA); err == nil {
		t.Fatal("a TLS PSK for a subsystem where the host has no key")
	}
	ctl.Stdin = strings.NewReader(key + "\n")
	if err := control(d, "", []string{"set", "host", nqnB, host, "-tls-key", "-", "-dhchap-key", "-"}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "only one secret can come from standard input") {
		t.Fatalf("two secrets on standard input: %v", err)
	}
}
