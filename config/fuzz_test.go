package config

import (
	"bytes"
	"os"
	"testing"
)

// FuzzParse feeds arbitrary files to Parse: it must never panic, and what
// it accepts must survive Marshal and Parse again unchanged.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/example.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("ports: [{id: 1}]"))
	f.Add([]byte("subsystems: [{namespaces: [{size: 1GiB}]}]"))
	f.Add([]byte("ports: [{id: 1, address: 10.0.0.1}]\nsubsystems: [{nqn: nqn.a, allow_any_host: true, namespaces: [{nsid: 1, backend: nullblk, size: 1000KB}]}]"))
	f.Add([]byte("ports: &p [{id: 1, address: '::1'}]\nsubsystems: *p"))
	f.Add([]byte("ports: [{id: 1, address: 10.0.0.1, inline_data_size: 0}, {id: 2, address: 10.0.0.1}]"))
	f.Add([]byte("ports: [{id: 1, address: 10.0.0.1}]\nsubsystems: [{nqn: nqn.a, hosts: [nqn.h, {nqn: nqn.k, dhchap_key: '" + testKey + "', dhchap_ctrl_key: '" + testKey2 + "'}], dhchap_hashes: [sha512], dhchap_dhgroups: [ffdhe2048, null]}]"))
	f.Add([]byte("ports: [{id: 1, address: 10.0.0.1}]\nsubsystems: [{nqn: nqn.a, hosts: [{nqn: nqn.k, dhchap_key: '" + testKey + "', dhchap_hashes: [sha384], dhchap_dhgroups: [ffdhe8192, null]}], dhchap_hashes: [sha384, sha512]}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		// No subsystems is valid (discovery only; subsystems come by
		// reload or ctl), no ports is not.
		if len(c.Ports) == 0 {
			t.Fatalf("accepted a configuration without ports")
		}
		out, err := Marshal(c)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, out)
		}
		again, err := Marshal(back)
		if err != nil || !bytes.Equal(out, again) {
			t.Fatalf("marshal is not stable (%v):\n%s\n%s", err, out, again)
		}
	})
}

// FuzzSize checks that ParseSize never yields a negative size and that
// String gives back a form ParseSize reads to the same value.
func FuzzSize(f *testing.F) {
	for _, s := range []string{"1GiB", "4096", "100MB", "7T", "4194304TiB", " 1 K", "-0", "+5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, v)
		}
		back, err := ParseSize(v.String())
		if err != nil || back != v {
			t.Fatalf("String round trip of %d: %q → %d, %v", v, v.String(), back, err)
		}
	})
}

// FuzzParseShared feeds arbitrary objects to ParseShared: it must never
// panic, and what it accepts must encode and decode again unchanged.
func FuzzParseShared(f *testing.F) {
	f.Add([]byte("version: 1\nsubsystems: [{nqn: nqn.a, namespaces: [{nsid: 1, backend: rbd, image: v}]}]"))
	f.Add([]byte("version: 2\nsubsystems: [{nqn: nqn.a, hosts: [{nqn: nqn.k, dhchap_key: 'sealed:AAAA'}]}]"))
	key := bytes.Repeat([]byte{1}, 32)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseShared(data, key)
		if err != nil {
			return
		}
		out, err := MarshalShared(s, key)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := ParseShared(out, key)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, out)
		}
		if back.Version != s.Version || len(back.Subsystems) != len(s.Subsystems) {
			t.Fatalf("changed on the way: %+v -> %+v", s, back)
		}
	})
}
