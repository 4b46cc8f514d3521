package dhchap

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const (
	katHost = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000001"
	katSub  = "nqn.2026-11.io.example:vol1"
)

// Known answers, computed apart from this package by a short script that
// follows Linux's drivers/nvme/common/auth.c and target/auth.c step by
// step: key byte i is (7i + len) mod 256, the controller key is the host
// key reversed; C1 byte i is A0h+i and C2 byte i 30h+i (HL bytes);
// S1 = 11223344h, S2 = 55667788h, T_ID = 0102h, SC_C = 0; the host key
// is transformed with the host NQN and the controller key with the
// subsystem NQN; the augmented R1 uses the session key 00h, 01h, …, FFh.
var kats = []struct {
	keyLen           int
	transform, hash  uint8
	hostKey, ctrlKey string
	r1, r2, r1Aug    string
}{
	{32, 1, 1, "DHHC-1:01:ICcuNTxDSlFYX2ZtdHuCiZCXnqWss7rByM/W3eTr8vmMpzdS:", "DHHC-1:01:+fLr5N3Wz8jBurOspZ6XkImCe3RtZl9YUUpDPDUuJyDcYFZX:", "658dfe68c3774e8e6efc75c07f2f03ff0a94fa4c887712e1f27c831a08b1e9bc", "fbe556ea756295d35288ee9b8e838fc957f909fad498d46a670ed4633409c5a6", "506249e8b703cfc24c36e54f038e2e7d3f9db7eac56702b2effef35b910c960d"},
	{48, 2, 2, "DHHC-1:02:MDc+RUxTWmFob3Z9hIuSmaCnrrW8w8rR2N/m7fT7AgkQFx4lLDM6QUhPVl1ka3J51wkKvA==:", "DHHC-1:02:eXJrZF1WT0hBOjMsJR4XEAkC+/Tt5t/Y0crDvLWup6CZkouEfXZvaGFaU0xFPjcwQgrATg==:", "f4dfa503ed1f2bab4a624bf72a7dcbddc22fba79c5a4927c8131083e59c30053ee0ad9ceefe3c42ca98458e2293dc9bd", "628630dba5d451d393eb3740b86cf313b9b234ece12e3e08e844649be48250db6231ba66c5d99ad9f0fadb782acc7b51", "1c83e1890e1d9ed35c492ec00f56cdc25a822c6eca13b20b13b111e92ffe7686253b9305399d8dc5da4031c8cb3f120a"},
	{64, 3, 3, "DHHC-1:03:QEdOVVxjanF4f4aNlJuiqbC3vsXM09rh6O/2/QQLEhkgJy41PENKUVhfZm10e4KJkJeepayzusHIz9bd5Ovy+eQYloY=:", "DHHC-1:03:+fLr5N3Wz8jBurOspZ6XkImCe3RtZl9YUUpDPDUuJyAZEgsE/fbv6OHa08zFvrewqaKblI2Gf3hxamNcVU5HQI9aKeI=:", "5a28b53b29234a14ac48d703e102378529ba804d91c3608b4ec2e52d5aebffd0ba61aad716cb906a394863f625126d05d0dff243b1985f505a5b1581637cf9f7", "8605a2978217f2d92b744e99a378067d39a3b23e5cc259abc416004d395aca76d322436219a4a6e057dfd7ac38b53c6ea740a57b8141d9e04397c3787e259a0d", "4df41894cd9963d2ef1857c184c2774ca93d1dcaef6b7b4aee69a91ece77c8bd6ec914c76b32494efca33b9f08e23567df80bff3f39b37ebb1fb233e8ba14cec"},
	{32, 0, 3, "DHHC-1:00:ICcuNTxDSlFYX2ZtdHuCiZCXnqWss7rByM/W3eTr8vmMpzdS:", "DHHC-1:00:+fLr5N3Wz8jBurOspZ6XkImCe3RtZl9YUUpDPDUuJyDcYFZX:", "bfe507fbeb443e753bc139245c4d7b358eacc501a33f0f828776e6127a6de5c7382ddfd7c32ef9d490fbcc0154d17c94f5bf3b2d19eb89bd01a0f6788ddd6d79", "b04629bdf07a9f7e2827d855c4be317affa3b488e600e4da6733dd313c9d071fa45989693182408b99c1191e6c1352657cc03e486ba11b16fbfa4dc731e11273", "3b92ba31b37610b335c286611b84531926e4215a37985f6a6f5921e9ad4b9d3e3b6cff5cc4839f6e91851315ce6608d88655d6e5dfb403fda1d225683149ef67"},
	{48, 0, 1, "DHHC-1:00:MDc+RUxTWmFob3Z9hIuSmaCnrrW8w8rR2N/m7fT7AgkQFx4lLDM6QUhPVl1ka3J51wkKvA==:", "DHHC-1:00:eXJrZF1WT0hBOjMsJR4XEAkC+/Tt5t/Y0crDvLWup6CZkouEfXZvaGFaU0xFPjcwQgrATg==:", "04ad0ad30f3c08440e8ec20094491479fd5c5884f37665dfa32a1883a4ad4f79", "0289e5312dd63c4bf760a76378af1985fb27cef571567868805b4704f56ef44e", "de4691d3118f88d54159cbb69e53875c7210d927bbb50528a17cb2b8c8d862cc"},
}

func seq(n int, start byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i)
	}
	return b
}

func TestKnownAnswers(t *testing.T) {
	for _, k := range kats {
		t.Run(fmt.Sprintf("key%d-nn%d-hash%d", k.keyLen, k.transform, k.hash), func(t *testing.T) {
			hs, err := ParseSecret(k.hostKey)
			if err != nil {
				t.Fatal(err)
			}
			for i, b := range hs.Key {
				if b != byte(7*i+k.keyLen) || hs.Transform != k.transform || len(hs.Key) != k.keyLen {
					t.Fatalf("decoded key byte %d", i)
				}
			}
			if hs.Encode() != k.hostKey {
				t.Fatal("Encode does not give back the DHHC-1 string")
			}
			cs, err := ParseSecret(k.ctrlKey)
			if err != nil {
				t.Fatal(err)
			}
			hl := HashLen(k.hash)
			c1, c2 := seq(hl, 0xa0), seq(hl, 0x30)
			r1 := HostResponse(k.hash, TransformKey(hs, katHost), c1, 0x11223344, 0x0102, 0, katHost, katSub)
			r2 := ControllerResponse(k.hash, TransformKey(cs, katSub), c2, 0x55667788, 0x0102, 0, katSub, katHost)
			skey := seq(256, 0)
			r1a := HostResponse(k.hash, TransformKey(hs, katHost), AugmentChallenge(k.hash, skey, c1), 0x11223344, 0x0102, 0, katHost, katSub)
			for name, got := range map[string][]byte{"R1": r1, "R2": r2, "augmented R1": r1a} {
				want := map[string]string{"R1": k.r1, "R2": k.r2, "augmented R1": k.r1Aug}[name]
				if hex.EncodeToString(got) != want {
					t.Errorf("%s = %x, want %s", name, got, want)
				}
			}
		})
	}
}

func TestParseSecretErrors(t *testing.T) {
	good := kats[0].hostKey
	for _, c := range []struct {
		in   string
		want error
	}{
		{"", ErrSecretFormat},
		{"DHHC-2:01:abc:", ErrSecretFormat},
		{"DHHC-1:1:abc:", ErrSecretFormat},
		{"DHHC-1:04:" + good[10:], ErrSecretTransform},
		{"DHHC-1:01:!!!!:", ErrSecretBase64},
		{"DHHC-1:01:AAAA:", ErrSecretLength},
		{strings.Replace(good, "ICcu", "ICcv", 1), ErrSecretCRC},
		{good[:len(good)-1] + ":x", ErrSecretFormat},
	} {
		_, err := ParseSecret(c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("%q: %v, want %v", c.in, err, c.want)
		}
		if err != nil && len(c.in) > 12 && strings.Contains(err.Error(), c.in[10:]) {
			t.Errorf("error repeats the secret: %v", err)
		}
	}
	// A key made outside this package (as in the blktests control script's
	// self-test), whose CRC must check out:
	// the CRC convention is the one Linux and nvme-cli use.
	if _, err := ParseSecret("DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:"); err != nil {
		t.Fatal(err)
	}
	// Without the trailing colon, and with a key file's newline.
	if _, err := ParseSecret(strings.TrimSuffix(good, ":") + "\n"); err != nil {
		t.Fatal(err)
	}
	s, _ := ParseSecret(good)
	if fmt.Sprint(s) != "[redacted]" || fmt.Sprintf("%#v", s) != "[redacted]" || fmt.Sprintf("%v", struct{ S Secret }{*s}) != "{[redacted]}" {
		t.Fatal("a secret prints")
	}
}

func FuzzParseSecret(f *testing.F) {
	for _, k := range kats {
		f.Add(k.hostKey)
	}
	f.Add("DHHC-1:00::")
	f.Fuzz(func(t *testing.T, s string) {
		sec, err := ParseSecret(s)
		if err != nil {
			return
		}
		if n := len(sec.Key); n != 32 && n != 48 && n != 64 || sec.Transform > 3 {
			t.Fatalf("accepted key of %d bytes, transform %d", n, sec.Transform)
		}
		back, err := ParseSecret(sec.Encode())
		if err != nil || !back.Equal(sec) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// nvme-cli (2.3, libnvme 1.3) transforms a secret itself when given one:
// `nvme gen-dhchap-key --secret=HEX --key-length=N --hmac=NN --nqn=katHost`
// printed these for the KAT keys above (key byte i = 7i + N). Their key
// bytes are HMAC(secret, NQN || "NVMe-over-Fabrics"), which TransformKey
// must give too: an implementation apart from Linux's and ours.
func TestTransformMatchesNvmeCli(t *testing.T) {
	for _, c := range []struct {
		keyLen int
		nn     uint8
		out    string
	}{
		{32, 1, "DHHC-1:01:eFirHzPdZNvaGUQxx7jz8eZ76AMgdqVYYbzn4IA2a0jAISZv:"},
		{48, 2, "DHHC-1:02:diE781fiCb70mD6q5qdJz9pO5QtJF6zk3ehWPtIAnGpn+LuO3rwD6LGeGZEL+c3Ig6jeaQ==:"},
		{64, 3, "DHHC-1:03:JQLzgxo1AKMoWYSbFFW8NJtebDrEM3v/v52LBDkIBOmzzdbAAXVVFe0hpgZhlwruHgjfX0eCOQAphCNtxkaDA0pAlSo=:"},
	} {
		want, err := ParseSecret(c.out)
		if err != nil {
			t.Fatal(err)
		}
		key := make([]byte, c.keyLen)
		for i := range key {
			key[i] = byte(7*i + c.keyLen)
		}
		got := TransformKey(&Secret{Transform: c.nn, Key: key}, katHost)
		if hex.EncodeToString(got) != hex.EncodeToString(want.Key) {
			t.Errorf("NN %d: transformed key %x, nvme-cli %x", c.nn, got, want.Key)
		}
	}
}
