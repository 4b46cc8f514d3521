package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

const twoTenantsYAML = `
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - nqn: nqn.2026-11.io.example:tenants
    hosts: [nqn.2026-11.io.example:host-a, nqn.2026-11.io.example:host-b]
    namespaces:
      - {nsid: 1, backend: nullblk, size: 1GiB}
      - {nsid: 2, backend: nullblk, size: 1GiB, hosts: [nqn.2026-11.io.example:host-a]}
      - {nsid: 3, backend: nullblk, size: 1GiB, hosts: []}
`

// Left out, empty and listed are three different limits, and each
// survives being written out and read back (the daemon saves what the
// API changed).
func TestNamespaceHostsParseAndRoundTrip(t *testing.T) {
	c, err := Parse([]byte(twoTenantsYAML))
	if err != nil {
		t.Fatal(err)
	}
	check := func(c *Config, when string) {
		t.Helper()
		ns := c.Subsystems[0].Namespaces
		if ns[0].Limited() || ns[0].VisibleTo() != nil {
			t.Errorf("%s: namespace 1 without hosts is limited to %v", when, ns[0].VisibleTo())
		}
		if got := ns[1].VisibleTo(); !slices.Equal(got, []string{"nqn.2026-11.io.example:host-a"}) {
			t.Errorf("%s: namespace 2 visible to %v", when, got)
		}
		if !ns[2].Limited() || ns[2].VisibleTo() == nil || len(ns[2].VisibleTo()) != 0 {
			t.Errorf("%s: namespace 3 with hosts: [] is not hidden from every host (limited %v, %v)", when, ns[2].Limited(), ns[2].VisibleTo())
		}
	}
	check(c, "parsed")
	check(roundTrip(t, c), "written and read back")
	// A clone is a copy: changing its hosts leaves the original alone.
	cl := c.Clone()
	(*cl.Subsystems[0].Namespaces[1].Hosts)[0] = "nqn.2026-11.io.example:host-b"
	check(c, "after its clone changed")
}

// Each listed host must be one the subsystem allows; -check names the
// entry.
func TestNamespaceHostsValidation(t *testing.T) {
	for _, tc := range []struct {
		name, hosts, allowAny, want string
	}{
		{"not allowed", "[nqn.2026-11.io.example:host-a, nqn.2026-11.io.example:host-c]", "false",
			`subsystems[0].namespaces[1].hosts[1]: "nqn.2026-11.io.example:host-c" is not one of the subsystem's hosts: add it to the subsystem's hosts first, or set allow_any_host: true`},
		{"twice", "[nqn.2026-11.io.example:host-a, nqn.2026-11.io.example:host-a]", "false",
			`subsystems[0].namespaces[1].hosts[1]: "nqn.2026-11.io.example:host-a" is listed twice`},
		{"not an NQN", `["bad nqn"]`, "false",
			`subsystems[0].namespaces[1].hosts[0]: "bad nqn" must be printable ASCII without spaces`},
		{"any host allowed", "[nqn.2026-11.io.example:host-c]", "true", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.Replace(twoTenantsYAML, "hosts: [nqn.2026-11.io.example:host-a]}", "hosts: "+tc.hosts+"}", 1)
			y = strings.Replace(y, "    hosts: [nqn.2026-11.io.example:host-a, nqn.2026-11.io.example:host-b]\n",
				"    allow_any_host: "+tc.allowAny+"\n    hosts: [nqn.2026-11.io.example:host-a, nqn.2026-11.io.example:host-b]\n", 1)
			_, err := Parse([]byte(y))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var es Errors
			if !errors.As(err, &es) || err.Error() != tc.want {
				t.Fatalf("got\n%v\nwant\n%s", err, tc.want)
			}
		})
	}
}

// A change of hosts alone keeps the namespace and changes who sees it in
// place; the same hosts in another order are no change.
func TestDiffNamespaceHosts(t *testing.T) {
	cur, err := Parse([]byte(twoTenantsYAML))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(ns []Namespace)
		want   []uint32 // namespaces in Plan.Visibility
	}{
		{"same", func([]Namespace) {}, nil},
		{"namespaces reordered", func(ns []Namespace) { ns[0], ns[1] = ns[1], ns[0] }, nil},
		{"another host", func(ns []Namespace) {
			ns[1].SetVisibleTo([]string{"nqn.2026-11.io.example:host-b", "nqn.2026-11.io.example:host-a"})
		}, []uint32{2}},
		{"a host added", func(ns []Namespace) {
			ns[2].SetVisibleTo([]string{"nqn.2026-11.io.example:host-b"})
		}, []uint32{3}},
		{"limit lifted", func(ns []Namespace) { ns[1].SetVisibleTo(nil) }, []uint32{2}},
		{"limited to none", func(ns []Namespace) { ns[0].SetVisibleTo([]string{}) }, []uint32{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := cur.Clone()
			tc.mutate(next.Subsystems[0].Namespaces)
			p := Diff(cur, next)
			if len(p.AddNamespaces)+len(p.DelNamespaces) != 0 {
				t.Fatalf("namespaces deleted %v and added %v for a change of hosts", p.DelNamespaces, p.AddNamespaces)
			}
			var got []uint32
			for _, r := range p.Visibility {
				got = append(got, r.NSID)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("visibility changes for namespaces %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSameHostsIgnoresOrder(t *testing.T) {
	ab, ba, a, none := []string{"a", "b"}, []string{"b", "a"}, []string{"a"}, []string{}
	for _, tc := range []struct {
		x, y *[]string
		want bool
	}{{&ab, &ba, true}, {&ab, &a, false}, {nil, nil, true}, {nil, &none, false}, {&none, &none, true}, {&a, nil, false}} {
		if got := SameHosts(tc.x, tc.y); got != tc.want {
			t.Errorf("SameHosts(%v, %v) = %v, want %v", tc.x, tc.y, got, tc.want)
		}
	}
}
