package config

import (
	"os"
	"testing"
)

func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/example.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("ports: [{id: 1}]"))
	f.Add([]byte("subsystems: [{namespaces: [{size: 1GiB}]}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err == nil && (len(c.Ports) == 0 || len(c.Subsystems) == 0) {
			t.Fatalf("accepted a configuration without ports or subsystems")
		}
	})
}

func FuzzSize(f *testing.F) {
	for _, s := range []string{"1GiB", "4096", "100MB", "7T"} {
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
