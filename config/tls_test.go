package config

import (
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/tlspsk"
)

// Keys `nvme gen-tls-key --hmac=1` and `--hmac=2` print (tlspsk's known
// answers).
const (
	tlsKey256 = "NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:"
	tlsKey384 = "NVMeTLSkey-1:02:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwP/w0S89ELi3W2LxIcLXVsDn8kXZQ==:"
)

func TestPortTLSValidation(t *testing.T) {
	for _, c := range []struct {
		name, transport, tls, want string
	}{
		{"tcp required", TransportTCP, TLSRequired, ""},
		{"tcp allowed", TransportTCP, TLSAllowed, ""},
		{"tcp none", TransportTCP, TLSNone, ""},
		{"rdma none", TransportRDMA, TLSNone, ""},
		{"rdma required", TransportRDMA, TLSRequired, "ports[0].tls: TLS is NVMe/TCP's secure channel: a rdma port has none"},
		{"unknown", TransportTCP, "yes", `ports[0].tls: unknown mode "yes" (want none, allowed, required)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := validConfig()
			cfg.Ports[0].Transport, cfg.Ports[0].TLS = c.transport, c.tls
			err := cfg.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("got %v, want %s…", err, c.want)
			}
		})
	}
}

func TestHostTLSKeyValidation(t *testing.T) {
	good := writeKey(t, tlsKey384+"\n", 0o600)
	open := writeKey(t, tlsKey256, 0o644)
	for _, c := range []struct {
		name string
		h    Host
		want string
	}{
		{"inline", Host{NQN: hostA, TLSKey: tlsKey256}, ""},
		{"file", Host{NQN: hostA, TLSKeyFile: good, TLSDerivation: "compat"}, ""},
		{"crc", Host{NQN: hostA, TLSKey: strings.Replace(tlsKey256, "VRLb", "VRLc", 1)}, "subsystems[0].hosts[0].tls_key: "},
		{"dhchap form", Host{NQN: hostA, TLSKey: testKey}, "subsystems[0].hosts[0].tls_key: "},
		{"both", Host{NQN: hostA, TLSKey: tlsKey256, TLSKeyFile: good}, "subsystems[0].hosts[0].tls_key: set tls_key or tls_key_file, not both"},
		{"file mode", Host{NQN: hostA, TLSKeyFile: open}, "subsystems[0].hosts[0].tls_key_file: " + open + " is readable or writable by others"},
		{"redacted", Host{NQN: hostA, TLSKey: Redacted}, "subsystems[0].hosts[0].tls_key: the key was redacted"},
		{"derivation", Host{NQN: hostA, TLSKey: tlsKey256, TLSDerivation: "rfc5869"}, `subsystems[0].hosts[0].tls_derivation: "rfc5869" is not one of`},
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
			if strings.Contains(err.Error(), tlsKey256[16:40]) {
				t.Fatalf("error repeats the key: %v", err)
			}
		})
	}
}

func TestHostTLSPSK(t *testing.T) {
	k, d, err := Host{NQN: hostA, TLSKeyFile: writeKey(t, tlsKey384+"\r\n", 0o600), TLSDerivation: "libnvme-1.7"}.TLSPSK()
	if err != nil {
		t.Fatal(err)
	}
	if k.Encode() != tlsKey384 || d != tlspsk.DerivationLibnvme17 {
		t.Errorf("got the key %q with %v, want the file's with libnvme 1.7", k.Encode(), d)
	}
	if k, _, err := (Host{NQN: hostA}).TLSPSK(); k != nil || err != nil {
		t.Errorf("a host without a key: %v, %v", k, err)
	}
	h, n := Host{NQN: hostA, TLSKey: tlsKey256}.Redact()
	if n != 1 || h.TLSKey != Redacted {
		t.Errorf("Redact: %d replaced, tls_key %q", n, h.TLSKey)
	}
}
