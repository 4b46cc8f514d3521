package config

import (
	"strings"
	"testing"
)

func TestNamespaceUUIDDerived(t *testing.T) {
	// Independently computed (Python's uuid.uuid5) so a change to the
	// derivation, which would renumber every host's view, fails here.
	const golden = "012ae3d1-8eaa-5380-9a09-7a060956a519"
	a, err := NamespaceUUID("nqn.2026-11.io.example:vol1", 1, "")
	if err != nil || FormatUUID(a) != golden {
		t.Fatalf("derived %s, %v; want %s", FormatUUID(a), err, golden)
	}
	if a[6]>>4 != 5 || a[8]>>6 != 0b10 {
		t.Fatalf("version/variant bits wrong: %x", a)
	}
	others := []struct {
		nqn  string
		nsid uint32
	}{{"nqn.2026-11.io.example:vol1", 2}, {"nqn.2026-11.io.example:vol2", 1}, {"nqn.2026-11.io.example:vol", 11}}
	for _, o := range others {
		if b, _ := NamespaceUUID(o.nqn, o.nsid, ""); b == a {
			t.Errorf("%s/%d derives the same UUID as vol1/1", o.nqn, o.nsid)
		}
	}
}

func TestNamespaceUUIDConfigured(t *testing.T) {
	cases := []struct {
		in, want, err string
	}{
		{"01234567-89ab-cdef-0123-456789abcdef", "01234567-89ab-cdef-0123-456789abcdef", ""},
		{"01234567-89AB-CDEF-0123-456789ABCDEF", "01234567-89ab-cdef-0123-456789abcdef", ""},
		{"00000000-0000-0000-0000-000000000000", "", "nil UUID is reserved"},
		{"0123456789abcdef0123456789abcdef", "", "not a UUID"},
		{"01234567-89ab-cdef-0123-456789abcdeg", "", "not a UUID"},
		{"01234567-89ab-cdef-0123-4567-9abcde-", "", "not a UUID"},
		{"{01234567-89ab-cdef-0123-456789abcd}", "", "not a UUID"},
		{"01234567+89ab-cdef-0123-456789abcdef", "", "not a UUID"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			u, err := NamespaceUUID("ignored", 1, tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || FormatUUID(u) != tc.want {
				t.Fatalf("got %s, %v; want %s", FormatUUID(u), err, tc.want)
			}
		})
	}
}
