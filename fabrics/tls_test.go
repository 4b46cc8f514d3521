package fabrics

import (
	"bytes"
	"errors"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/tlspsk"
)

// A queue whose secure channel was made with one host's PSK identity
// connects as that host to that subsystem, and as no other: a host holding
// its own key cannot name another host, or another subsystem, in Connect.
func TestConnectMustNameTheTLSIdentity(t *testing.T) {
	tg, p, _ := testTarget(t)
	for _, c := range []struct {
		name, host, sub string
		ok              bool
	}{
		{"the identity's", testHost, testNQN, true},
		{"another host", hostA, testNQN, false},
		{"another subsystem", testHost, "nqn.2026-11.io.example:other", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := NewLoopQueue(tg, p, 0, 32)
			defer q.Close()
			q.SetTLSIdentity(c.host, c.sub)
			h := &host{t: t, admin: q}
			rsp := h.submit(q, connectCmd(0, 31, 0, false), connectData(testNQN, testHost, 0xffff))
			if c.ok != (rsp.Status() == 0) {
				t.Fatalf("Connect as %s to %s over a channel of %s and %s: status %v", testHost, testNQN, c.host, c.sub, rsp.Status())
			}
			if !c.ok && rsp.Status()&^nvme.DNR != nvme.StatusConnectInvalidHost {
				t.Fatalf("status %v, want Connect Invalid Host", rsp.Status())
			}
		})
	}
	if n := tg.Subsystem(testNQN).Stats.Refused.Counts()[RefusedKey{"tls_identity_mismatch", p.ID}]; n != 2 {
		t.Errorf("refusals counted as tls_identity_mismatch: %d, want 2", n)
	}
}

// Target.TLSPSK finds the host's key by the identity: the subsystem's,
// or for the discovery subsystem the first one the host has a key in; and
// it says why there is none.
func TestTargetTLSPSK(t *testing.T) {
	tg, _, _ := testTarget(t)
	const key = "NVMeTLSkey-1:01:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp28JD1Z:"
	k, err := tlspsk.ParseConfiguredPSK(key)
	if err != nil {
		t.Fatal(err)
	}
	s := tg.Subsystem(testNQN)
	s.SetHostKeys(map[string]HostKeys{testHost: {TLS: k}})
	id := "NVMe0R01 " + testHost + " " + testNQN
	want, err := tlspsk.ServerPSK(k, id, testHost, testNQN, tlspsk.DerivationRFC8446)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tg.TLSPSK(id); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("TLSPSK(%q) = %x, %v; want %x", id, got, err, want)
	}
	disc := "NVMe0R01 " + testHost + " " + nvme.DiscoveryNQN
	if _, err := tg.TLSPSK(disc); err != nil {
		t.Errorf("discovery with the host's key of %s: %v", testNQN, err)
	}
	for _, bad := range []string{
		"NVMe0R01 " + hostA + " " + testNQN,                  // no key for this host
		"NVMe0R01 " + testHost + " nqn.2026-11.io.example:x", // no such subsystem
	} {
		if _, err := tg.TLSPSK(bad); !errors.Is(err, ErrNoTLSKey) {
			t.Errorf("TLSPSK(%q): %v, want ErrNoTLSKey", bad, err)
		}
	}
	if _, err := tg.TLSPSK("NVMe0R01 " + testHost); err == nil {
		t.Error("a malformed identity gave a key")
	}
}
