package tlspsk

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
)

// interchange builds an interchange string around raw, which already
// carries its CRC or deliberately does not.
func interchange(hh string, raw []byte) string {
	return keyPrefix + hh + ":" + base64.StdEncoding.EncodeToString(raw) + ":"
}

func withCRC(key []byte) []byte {
	return binary.LittleEndian.AppendUint32(append([]byte(nil), key...), crc32.ChecksumIEEE(key))
}

func TestParseConfiguredPSKErrors(t *testing.T) {
	good := nvmeCLIKeys[0].key
	k32, k48 := seq(32, 1, 7), seq(48, 2, 5)
	badCRC := withCRC(k32)
	badCRC[32] ^= 1
	for _, c := range []struct {
		name, in string
		want     error
	}{
		{"empty", "", ErrKeyFormat},
		{"DH-HMAC-CHAP secret", "DHHC-1:01:" + good[16:], ErrKeyFormat},
		{"version 2", strings.Replace(good, "NVMeTLSkey-1:", "NVMeTLSkey-2:", 1), ErrKeyFormat},
		{"lower case prefix", strings.ToLower(good[:10]) + good[10:], ErrKeyFormat},
		{"no trailing colon", strings.TrimSuffix(good, ":"), ErrKeyFormat},
		{"HH of one digit", "NVMeTLSkey-1:1:" + good[16:], ErrKeyFormat},
		{"colon inside the key", good[:30] + ":" + good[31:], ErrKeyFormat},
		{"only the header", "NVMeTLSkey-1:01::", ErrKeyLength},
		{"HH 03", interchange("03", withCRC(seq(64, 0, 1))), ErrKeyHash},
		{"HH 1 with a space", "NVMeTLSkey-1: 1:" + good[16:], ErrKeyHash},
		{"HH in hex 0a", interchange("0a", withCRC(k32)), ErrKeyHash},
		{"bad base64 character", good[:20] + "*" + good[21:], ErrKeyBase64},
		{"base64 with a newline", good[:40] + "\n" + good[40:], ErrKeyBase64},
		{"base64 missing padding", strings.TrimSuffix(nvmeCLIKeys[2].key, "==:") + ":", ErrKeyBase64},
		{"base64 with stray bits", nvmeCLIKeys[2].key[:len(nvmeCLIKeys[2].key)-4] + "R==:", ErrKeyBase64},
		{"01 with a 48-byte key", interchange("01", withCRC(k48)), ErrKeyLength},
		{"02 with a 32-byte key", interchange("02", withCRC(k32)), ErrKeyLength},
		{"00 with a 64-byte key", interchange("00", withCRC(seq(64, 0, 1))), ErrKeyLength},
		{"01 without the CRC", interchange("01", k32[:31]), ErrKeyLength},
		{"01 with a short key", interchange("01", withCRC(k32[:31])), ErrKeyLength},
		{"bad CRC", interchange("01", badCRC), ErrKeyCRC},
		{"truncated string", good[:len(good)-5] + ":", ErrKeyLength},
		{"another key's CRC", interchange("02", append(k48[:48:48], withCRC(seq(48, 3, 5))[48:]...)), ErrKeyCRC},
	} {
		k, err := ParseConfiguredPSK(c.in)
		if !errors.Is(err, c.want) || k != nil {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// An error never repeats the key: it would end up in a log.
func TestParseErrorsDoNotEchoTheKey(t *testing.T) {
	bad := interchange("01", append(seq(32, 0x61, 1), 0, 0, 0, 0))
	_, err := ParseConfiguredPSK(bad)
	if err == nil || strings.Contains(err.Error(), bad[16:30]) || strings.Contains(err.Error(), "abcdef") {
		t.Errorf("error %v", err)
	}
}

func TestParseConfiguredPSKTrimsAKeyFile(t *testing.T) {
	k, err := ParseConfiguredPSK("  " + libnvmeKATs[1].key + "\r\n")
	if err != nil || k.Encode() != libnvmeKATs[1].key {
		t.Fatalf("%v", err)
	}
}

func TestNewConfiguredPSK(t *testing.T) {
	for _, c := range []struct {
		h      Hash
		n      int
		cipher Hash
		err    error
	}{
		{HashNone, 32, HashSHA256, nil}, {HashNone, 48, HashSHA384, nil},
		{HashSHA256, 32, HashSHA256, nil}, {HashSHA384, 48, HashSHA384, nil},
		{HashSHA256, 48, 0, ErrKeyLength}, {HashSHA384, 32, 0, ErrKeyLength},
		{HashNone, 64, 0, ErrKeyLength}, {HashNone, 0, 0, ErrKeyLength}, {Hash(3), 64, 0, ErrKeyHash},
	} {
		key := seq(c.n, 9, 1)
		k, err := NewConfiguredPSK(c.h, key)
		if !errors.Is(err, c.err) {
			t.Errorf("%v, %d bytes: %v, want %v", c.h, c.n, err, c.err)
			continue
		}
		if err != nil {
			continue
		}
		key[0]++ // the key is copied
		if k.CipherHash() != c.cipher || k.Transform() != c.h || bytes.Equal(k.Bytes(), key) {
			t.Errorf("%v, %d bytes: cipher %v", c.h, c.n, k.CipherHash())
		}
		back, err := ParseConfiguredPSK(k.Encode())
		if err != nil || !back.Equal(k) {
			t.Errorf("%v, %d bytes: round trip %v", c.h, c.n, err)
		}
	}
}

func TestConfiguredPSKIsRedacted(t *testing.T) {
	k, err := ParseConfiguredPSK(libnvmeKATs[0].key)
	if err != nil {
		t.Fatal(err)
	}
	holder := struct{ Key *ConfiguredPSK }{k}
	for _, s := range []string{
		fmt.Sprint(k), fmt.Sprint(*k), fmt.Sprintf("%v %+v %#v %s %q %x %X %d", k, k, k, k, k, k, k, k),
		fmt.Sprintf("%#v %+v", *k, *k), fmt.Sprintf("%+v", holder), k.String(), k.GoString(),
	} {
		for _, leak := range []string{"VRLbtnN9", "5512db", "5512DB", "85 18 219", "[85 18"} {
			if strings.Contains(s, leak) {
				t.Errorf("%q shows the key", s)
			}
		}
	}
	if fmt.Sprintf("%x", k) != "[redacted]" {
		t.Errorf("%%x gives %q", fmt.Sprintf("%x", k))
	}
}

func TestEqualAndClear(t *testing.T) {
	a, _ := ParseConfiguredPSK(libnvmeKATs[0].key)
	b, _ := ParseConfiguredPSK(libnvmeKATs[0].key)
	z, _ := NewConfiguredPSK(HashNone, a.Bytes())
	if !a.Equal(b) || a.Equal(z) || a.Equal(nil) || !(*ConfiguredPSK)(nil).Equal(nil) {
		t.Error("Equal")
	}
	b.Clear()
	if a.Equal(b) || !bytes.Equal(b.Bytes(), make([]byte, 32)) {
		t.Error("Clear")
	}
	(*ConfiguredPSK)(nil).Clear()
}

func TestHashNames(t *testing.T) {
	for h, want := range map[Hash]string{HashNone: "none", HashSHA256: "SHA-256", HashSHA384: "SHA-384", 3: "hash(03)"} {
		if h.String() != want {
			t.Errorf("%d: %q", h, h.String())
		}
	}
}
