package tlspsk

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// Two longest NQNs make a version 0 identity of 456 bytes, more than
// RFC 8446's context holds: libnvme 1.16 refuses it either way, libnvme
// 1.15 derived it (TLS PSK 66b55d8e…, computed by it as in kat_test.go).
// A version 1 context is short whatever the NQNs; the values are libnvme
// 1.16's.
func TestLongestNQNs(t *testing.T) {
	host, sub := "nqn."+strings.Repeat("h", 219), "nqn."+strings.Repeat("s", 219)
	k, err := NewConfiguredPSK(HashSHA256, seq(32, 0x40, 3))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := HostPSK(k, 0, host, sub, DerivationRFC8446); err == nil || !strings.Contains(err.Error(), "456 bytes") {
		t.Errorf("v0 RFC 8446: %v", err)
	}
	for _, c := range []struct {
		version int
		d       Derivation
		want    string
	}{
		{0, DerivationCompat, "66b55d8e4668e6f835d7eb25a62982ae24d965f7f1296961032c1ea9196f24ec"},
		{1, DerivationRFC8446, "8e82772a8a189cd4ce05dabb8d8f0d7ba8863dd8639a19b609b0b0a007a6b617"},
		{1, DerivationCompat, "f04cd8525aeee9653563b4b72700106499ae20e039991d1d1cf657e72077def1"},
	} {
		id, psk, err := HostPSK(k, c.version, host, sub, c.d)
		if err != nil || hex.EncodeToString(psk) != c.want {
			t.Errorf("v%d %v: %x, %v", c.version, c.d, psk, err)
		}
		if back, err := ParseIdentity(id.String()); err != nil || back != id {
			t.Errorf("v%d %v: identity does not parse back: %v", c.version, c.d, err)
		}
	}
}

func TestDerivationErrors(t *testing.T) {
	k, _ := ParseConfiguredPSK(libnvmeKATs[0].key)
	k00, _ := ParseConfiguredPSK(libnvmeKATs[4].key)
	id, _ := ParseIdentity(libnvmeKATs[6].identity)
	retained := mustHex(t, libnvmeKATs[6].retained)
	for name, err := range map[string]error{
		"retained, host with a space": second(k.RetainedPSK("a b", DerivationRFC8446)),
		"retained, Linux 6.14":        second(k.RetainedPSK(testHost, DerivationLinux614)),
		"retained, unknown":           second(k.RetainedPSK(testHost, Derivation(9))),
		"TLS PSK, short input":        second(TLSPSK(retained[:31], id, DerivationRFC8446)),
		"TLS PSK, SHA-384 input":      second(TLSPSK(seq(48, 0, 1), id, DerivationRFC8446)),
		"TLS PSK, bad identity":       second(TLSPSK(retained, Identity{Version: 1, Hash: HashSHA256, HostNQN: "h", SubsysNQN: "s"}, DerivationRFC8446)),
		"TLS PSK, unknown derivation": second(TLSPSK(retained, id, Derivation(-1))),
		"digest, hash none":           second(PSKDigest(HashNone, retained, "h", "s")),
		"digest, wrong length":        second(PSKDigest(HashSHA384, retained, "h", "s")),
		"host, version 2":             third(HostPSK(k, 2, testHost, testSub, DerivationRFC8446)),
		"host, empty subsystem":       third(HostPSK(k, 0, testHost, "", DerivationRFC8446)),
		"host, long host":             third(HostPSK(k00, 0, strings.Repeat("h", 224), testSub, DerivationRFC8446)),
		"generated, hash none":        second(GeneratedPSK(HashNone, seq(32, 0, 1), seq(32, 0, 1), seq(32, 0, 1))),
		"generated, short C2":         second(GeneratedPSK(HashSHA256, seq(32, 0, 1), seq(32, 0, 1), seq(31, 0, 1))),
		"generated, SHA-384 C1":       second(GeneratedPSK(HashSHA256, seq(32, 0, 1), seq(48, 0, 1), seq(32, 0, 1))),
		"generated, no session key":   second(GeneratedPSK(HashSHA256, nil, seq(32, 0, 1), seq(32, 0, 1))),
		"generated identity, bad NQN": second(GeneratedIdentity(HashSHA256, seq(32, 0, 1), "h", "")),
		"generated identity, length":  second(GeneratedIdentity(HashSHA384, seq(32, 0, 1), "h", "s")),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func second[T any](_ T, err error) error        { return err }
func third[T, U any](_ T, _ U, err error) error { return err }

// With HH 00 the retained PSK is a copy of the key, for every libnvme
// derivation.
func TestRetainedPSKWithoutTransform(t *testing.T) {
	k, _ := ParseConfiguredPSK(libnvmeKATs[5].key)
	for _, d := range []Derivation{DerivationRFC8446, DerivationCompat, DerivationLibnvme17} {
		r, err := k.RetainedPSK(uuidHost, d)
		if err != nil || !bytes.Equal(r, k.Bytes()) {
			t.Fatalf("%v: %v", d, err)
		}
		r[0]++
		if bytes.Equal(r, k.Bytes()) {
			t.Fatalf("%v: the retained PSK is the key's own bytes", d)
		}
	}
}

// The info each derivation feeds HKDF-Expand, spelled out byte by byte:
// the libnvme and Linux sources these follow build exactly these.
func TestHKDFLabelBytes(t *testing.T) {
	for _, c := range []struct {
		d    Derivation
		want string
	}{
		{DerivationRFC8446, "0030" + "12" + hex.EncodeToString([]byte("tls13 nvme-tls-psk")) + "05" + hex.EncodeToString([]byte("01 ab"))},
		{DerivationCompat, "3000" + hex.EncodeToString([]byte("tls13 nvme-tls-psk01 ab"))},
		{DerivationLibnvme17, "3000" + hex.EncodeToString([]byte("tls13 nvme-tls-psk01 ab"))},
		{DerivationLinux614, "0030" + hex.EncodeToString([]byte("tls13 nvme-tls-psk01 ab"))},
	} {
		info, err := hkdfLabel(c.d, labelTLSPSK, "01 ab", 48)
		if err != nil || hex.EncodeToString(info) != c.want {
			t.Errorf("%v: %x, %v", c.d, info, err)
		}
	}
	if info, _ := hkdfLabel(DerivationRFC8446, labelRetained, "h", 32); hex.EncodeToString(info) != "00200d"+hex.EncodeToString([]byte("tls13 HostNQN"))+"0168" {
		t.Errorf("retained: %x", info)
	}
	for d, want := range map[Derivation]string{DerivationRFC8446: "RFC 8446", DerivationCompat: "compat",
		DerivationLinux614: "Linux 6.14", DerivationLibnvme17: "libnvme 1.7", 7: "Derivation(7)"} {
		if d.String() != want {
			t.Errorf("%d: %q", d, d.String())
		}
	}
}
