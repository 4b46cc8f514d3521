package tlspsk

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestServerPSKRefusals(t *testing.T) {
	k01, _ := ParseConfiguredPSK(libnvmeKATs[0].key) // HH 01, libnvme's test key
	k00, _ := ParseConfiguredPSK(libnvmeKATs[5].key) // HH 00, 48 bytes
	other, _ := NewConfiguredPSK(HashSHA256, seq(32, 0x77, 3))
	otherID, _, err := HostPSK(other, 1, testHost, testSub, DerivationRFC8446)
	if err != nil {
		t.Fatal(err)
	}
	compatID := "NVMe1R01 " + testHost + " " + testSub + " 66GuqV08TsAGII39teWUfwQwizjv06Jy8jOcX3NAAzM="
	rfcID := "NVMe1R01 " + testHost + " " + testSub + " " + digest256
	for _, c := range []struct {
		name    string
		k       *ConfiguredPSK
		offered string
		d       Derivation
		want    error
		says    string
	}{
		{"malformed", k01, "NVMe0R01 " + testHost, DerivationRFC8446, ErrIdentity, "fields"},
		{"another host", k01, "NVMe0R01 nqn.other " + testSub, DerivationRFC8446, ErrWrongHost, `"nqn.other", expected "nqn.psk-test-host"`},
		{"another subsystem", k01, "NVMe0R01 " + testHost + " nqn.other", DerivationRFC8446, ErrWrongSubsystem, `"nqn.other"`},
		{"generated", k01, "NVMe1G01 " + testHost + " " + testSub + " " + digest256, DerivationRFC8446, ErrGeneratedIdentity, "NVMe1G01"},
		{"SHA-384 for a SHA-256 key", k01, "NVMe0R02 " + testHost + " " + testSub, DerivationRFC8446, ErrHashMismatch, "offers SHA-384, the key (HH 01, 32 bytes) makes SHA-256"},
		{"SHA-256 for a 48-byte HH 00 key", k00, "NVMe0R01 " + uuidHost + " " + exampleSub, DerivationRFC8446, ErrHashMismatch, "HH 00, 48 bytes"},
		{"another key", k01, otherID.String(), DerivationRFC8446, ErrDigestMismatch, "different key"},
		{"another key, compat", k01, otherID.String(), DerivationCompat, ErrDigestMismatch, "different key"},
		{"a compat host", k01, compatID, DerivationRFC8446, ErrDigestMismatch, "the compat derivation"},
		{"an RFC 8446 host", k01, rfcID, DerivationCompat, ErrDigestMismatch, "the RFC 8446 derivation"},
		{"an RFC 8446 host, 1.8 configured", k01, rfcID, DerivationLibnvme17, ErrDigestMismatch, "the RFC 8446 derivation"},
	} {
		psk, err := ServerPSK(c.k, c.offered, testHostFor(c.k), testSubFor(c.k), c.d)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) || psk != nil {
			t.Errorf("%s: %v, want %v saying %q", c.name, err, c.want, c.says)
		}
	}
}

func testHostFor(k *ConfiguredPSK) string {
	if k.Transform() == HashNone {
		return uuidHost
	}
	return testHost
}

func testSubFor(k *ConfiguredPSK) string {
	if k.Transform() == HashNone {
		return exampleSub
	}
	return testSub
}

// With HH 00 the retained PSK is the configured key whatever the
// derivation, so the digest cannot tell a compat host; the TLS PSKs differ
// all the same.
func TestServerPSKHashNoneDigestIsTheSame(t *testing.T) {
	k, _ := ParseConfiguredPSK(libnvmeKATs[10].key)
	rfc, compat := libnvmeKATs[10], libnvmeKATs[22]
	if rfc.identity != compat.identity || rfc.tlsPSK == compat.tlsPSK {
		t.Fatal("the table changed")
	}
	for _, c := range []struct {
		d    Derivation
		want string
	}{{DerivationRFC8446, rfc.tlsPSK}, {DerivationCompat, compat.tlsPSK}} {
		psk, err := ServerPSK(k, rfc.identity, uuidHost, exampleSub, c.d)
		if err != nil || hex.EncodeToString(psk) != c.want {
			t.Errorf("%v: %x, %v", c.d, psk, err)
		}
	}
}

func TestServerPSKNeedsALibnvmeDerivation(t *testing.T) {
	k, _ := ParseConfiguredPSK(libnvmeKATs[0].key)
	if _, err := ServerPSK(k, libnvmeKATs[0].identity, testHost, testSub, DerivationLinux614); err == nil {
		t.Error("a retained PSK derived the Linux 6.14 way")
	}
}
