package config

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestExampleParses(t *testing.T) {
	c, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ns := c.Subsystems[0].Namespaces[0]
	if ns.Size != 1<<30 || ns.Backend != "file" || c.Ports[0].Port != 4420 || c.Ports[0].InlineDataSize != 8192 {
		t.Fatalf("decoded %+v / %+v", ns, c.Ports[0])
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(`
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - nqn: nqn.2026-11.io.example:a
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Ports[0]
	if c.Log.Level != "info" || c.Log.Format != "text" || p.Transport != "rdma" || p.Port != 4420 ||
		p.InlineDataSize != 8192 || p.MaxQueueSize != 128 || c.Subsystems[0].Namespaces[0].BlockSize != 512 {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

func TestValidationNamesPaths(t *testing.T) {
	base := `
log: {level: loud}
ports: [{id: 1, address: 10.0.0.1}, {id: 1, address: not-an-ip}]
subsystems:
  - nqn: nqn.2026-11.io.example:a
    allow_any_host: true
    ports: [9]
    namespaces:
      - {nsid: 1, backend: nullblk, size: 1GiB}
      - {nsid: 1, backend: flie, path: /x, size: 1MiB}
      - {nsid: 2, backend: nullblk, size: 1000, block_size: 4096}
      - {nsid: 3, backend: file, path: relative.img, size: 1MiB, uuid: nope}
  - nqn: bad
    namespaces: []
`
	_, err := Parse([]byte(base))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("want Errors, got %v", err)
	}
	want := []string{
		"log.level: unknown level \"loud\"",
		"ports[1].id: port 1 is defined twice",
		"ports[1].address: \"not-an-ip\"",
		"subsystems[0].ports[0]: no port has id 9",
		"subsystems[0].namespaces[1].nsid: nsid 1 is defined twice",
		"subsystems[0].namespaces[1].backend: unknown backend \"flie\"",
		"subsystems[0].namespaces[2].size: 1000 is not a multiple of block_size 4096",
		"subsystems[0].namespaces[3].path: \"relative.img\" must be an absolute path",
		"subsystems[0].namespaces[3].uuid:",
		"subsystems[1].nqn: \"bad\" must start with \"nqn.\"",
		"subsystems[1].hosts: no host may connect",
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("errors lack %q:\n%v", w, err)
		}
	}
	if len(es) != len(want) {
		t.Errorf("%d errors, want %d:\n%v", len(es), len(want), err)
	}
}

func TestUnknownKeyRejected(t *testing.T) {
	_, err := Parse([]byte("ports: [{id: 1, address: 10.0.0.1, prot: 4420}]\n"))
	if err == nil || !strings.Contains(err.Error(), "prot") {
		t.Fatalf("misspelled key accepted: %v", err)
	}
}

func TestNullHint(t *testing.T) {
	_, err := Parse([]byte(`
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - {nqn: nqn.2026-11.io.example:a, allow_any_host: true, namespaces: [{nsid: 1, backend: null, size: 1GiB}]}
`))
	if err == nil || !strings.Contains(err.Error(), "subsystems[0].namespaces[0].backend") || !strings.Contains(err.Error(), "nullblk") {
		t.Fatalf("null backend: %v", err)
	}
}

func TestSizes(t *testing.T) {
	cases := map[string]int64{
		"4096": 4096, "512B": 512, "64KiB": 64 << 10, "1GiB": 1 << 30, "2G": 2 << 30,
		"100MB": 100e6, "1TiB": 1 << 40, " 8 MiB ": 8 << 20,
	}
	for in, want := range cases {
		t.Run(in, func(t *testing.T) {
			got, err := ParseSize(in)
			if err != nil || int64(got) != want {
				t.Fatalf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
			}
		})
	}
	for _, bad := range []string{"", "-1", "1XB", "GiB", "1.5GiB", "99999999999TiB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	if Size(1<<30).String() != "1GiB" || Size(3072).String() != "3KiB" || Size(1000).String() != "1000" {
		t.Errorf("String: %s %s %s", Size(1<<30), Size(3072), Size(1000))
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	c, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out)
	if err != nil {
		t.Fatalf("re-parse: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(c, back) {
		t.Fatalf("round trip differs:\n%+v\n%+v", c, back)
	}
}

func TestNamespaceUUID(t *testing.T) {
	a, _ := NamespaceUUID("nqn.2026-11.io.example:a", 1, "")
	b, _ := NamespaceUUID("nqn.2026-11.io.example:a", 1, "")
	c, _ := NamespaceUUID("nqn.2026-11.io.example:a", 2, "")
	if a != b || a == c {
		t.Fatal("derived UUIDs are not stable per nqn+nsid")
	}
	if a[6]>>4 != 5 || a[8]>>6 != 2 {
		t.Fatalf("version/variant bits wrong: %x", a)
	}
	s := FormatUUID(a)
	back, err := ParseUUID(s)
	if err != nil || back != a {
		t.Fatalf("round trip %s: %v", s, err)
	}
	got, err := NamespaceUUID("x", 1, "01234567-89ab-cdef-0123-456789abcdef")
	if err != nil || FormatUUID(got) != "01234567-89ab-cdef-0123-456789abcdef" {
		t.Fatalf("configured UUID: %s %v", FormatUUID(got), err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load("/nonexistent/config.yaml"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
