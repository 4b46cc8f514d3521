package config

import (
	"strings"
	"testing"
)

func TestWarnings(t *testing.T) {
	const sub = `
subsystems:
  - nqn: nqn.2026-11.io.example:a
    allow_any_host: true
`
	const twoPorts = "ports: [{id: 1, address: 10.0.0.1}, {id: 2, address: 10.0.0.2}]\n"
	const onePort = "ports: [{id: 1, address: 10.0.0.1}]\n"
	cases := []struct {
		name, yaml string
		want       []string // prefixes, one per warning
	}{
		{"one port, whole range", onePort + sub, nil},
		{"two ports by default", twoPorts + sub, []string{"subsystems[0].ports: served on every port (1, 2), but no port sets an ANA state"}},
		{"two ports listed", twoPorts + sub + "    ports: [2, 1]\n", []string{"subsystems[0].ports: served on ports 2, 1, but"}},
		{"one of two ports", twoPorts + sub + "    ports: [2]\n", nil},
		{"range", onePort + sub + "    cntlid_min: 1000\n    cntlid_max: 1999\n",
			[]string{"subsystems[0].cntlid_min: controller IDs 1000..1999 leave room for another daemon serving this subsystem, but no port sets an ANA state"}},
		{"range top only", onePort + sub + "    cntlid_max: 999\n", []string{"subsystems[0].cntlid_max: controller IDs 1..999"}},
		{"ANA state set", "ports: [{id: 1, address: 10.0.0.1, ana: {1: optimized}}, {id: 2, address: 10.0.0.2}]\n" + sub, nil},
		{"ANA state on a port not served", "ports: [{id: 1, address: 10.0.0.1}, {id: 2, address: 10.0.0.2, ana: {1: inaccessible}}]\n" + sub + "    ports: [1]\n    cntlid_max: 999\n",
			[]string{"subsystems[0].cntlid_max:"}},
		{"namespace in another group", twoPorts + sub + "    namespaces: [{nsid: 1, backend: nullblk, size: 1MiB, ana_group: 2}]\n", nil},
		{"namespaces in the default group", twoPorts + sub + "    namespaces: [{nsid: 1, backend: nullblk, size: 1MiB, ana_group: 1}]\n",
			[]string{"subsystems[0].ports: served on every port (1, 2)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.yaml)
			got := c.Warnings()
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("warning %q, want it to start %q", got[i], w)
				}
			}
		})
	}
}
