package tlspsk

import (
	"strings"
	"testing"
)

// Both parsers read what others wrote, the identity straight off the
// network before anything is proven: neither may panic, and what either
// accepts must format back to exactly what it read, so that nothing is
// accepted in two spellings.

func FuzzParseConfiguredPSK(f *testing.F) {
	for _, k := range nvmeCLIKeys {
		f.Add(k.key)
	}
	for _, k := range libnvmeKATs[:6] {
		f.Add(k.key)
	}
	f.Add("NVMeTLSkey-1:03:AAAA:")
	f.Add("NVMeTLSkey-1:01:" + strings.Repeat("A", 47) + "=:")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseConfiguredPSK(s)
		if err != nil {
			if k != nil {
				t.Fatal("a key with an error")
			}
			return
		}
		if got := k.Encode(); got != strings.TrimSpace(s) {
			t.Fatalf("%q formats back as %q", s, got)
		}
		if !keyLengthFits(k.Transform(), len(k.Bytes())) || k.CipherHash().Size() != len(k.Bytes()) {
			t.Fatalf("%q: HH %v with %d bytes", s, k.Transform(), len(k.Bytes()))
		}
	})
}

func FuzzParseIdentity(f *testing.F) {
	for _, k := range libnvmeKATs {
		f.Add(k.identity)
	}
	for _, k := range kernelKATs {
		f.Add(k.identity)
	}
	f.Add("NVMe0G02 h s")
	f.Add("NVMe1R01 h s " + digest384)
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseIdentity(s)
		if err != nil {
			return
		}
		if got := id.String(); got != s {
			t.Fatalf("%q formats back as %q", s, got)
		}
		if err := id.Validate(); err != nil {
			t.Fatalf("%q parses but does not validate: %v", s, err)
		}
	})
}
