package config

import (
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const gatewayYAML = `
ceph: {conf: /etc/ceph/ceph.conf, user: nvmeof, keyring: /etc/ceph/nvmeof.keyring}
gateway:
  name: gw-a
  pool: rbd
  groups: [1]
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - nqn: nqn.2026-11.io.example:rbd
    serial: PAIR1
    allow_any_host: true
    cntlid_min: 1
    cntlid_max: 100
    namespaces:
      - {nsid: 1, backend: rbd, pool: rbd, image: vol1, uuid: 2b1f4c0e-8d0a-4c35-9d8e-0c6f1c1e5a01}
      - {nsid: 2, backend: nullblk, size: 1GiB, ana_group: 2}
`

func TestGatewayConfig(t *testing.T) {
	c, err := Parse([]byte(gatewayYAML))
	if err != nil {
		t.Fatal(err)
	}
	g := c.Gateway
	if g.LeaseSeconds != DefaultLeaseSeconds || g.LeasePrefix != DefaultLeasePrefix || g.Ceph != c.Subsystems[0].Namespaces[0].Ceph {
		t.Fatalf("defaults: %+v", g)
	}
	if g.FailbackDelay != DefaultFailbackDelay || !reflect.DeepEqual(g.Groups, []GatewayGroup{{ID: 1}}) {
		t.Fatalf("failback delay %d, groups %+v", g.FailbackDelay, g.Groups)
	}
	if o := g.LeaseObject(1); o != "nvmeof-tgt.gateway.group.1" {
		t.Errorf("lease object %q", o)
	}
	// The subsystem is shared (narrow cntlid range) with no port ANA
	// state: the gateway decides group 1, so no warning.
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("warnings: %q", w)
	}
}

// A namespace outside the gateway groups, in a subsystem another daemon
// serves too, still gets the warning that every path is optimized for it,
// though another namespace of the subsystem is in a gateway group.
func TestGatewayWarnsOfTheOtherNamespaces(t *testing.T) {
	y := gatewayYAML
	for _, r := range [][2]string{{"groups: [1]", "groups: [2]"}, {"image: vol1,", "image: vol1, ana_group: 2,"}, {"ana_group: 2}", "ana_group: 1}"}} {
		if y = strings.Replace(y, r[0], r[1], 1); !strings.Contains(y, r[1]) {
			t.Fatalf("no %q", r[0])
		}
	}
	c, err := Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	w := c.Warnings()
	if len(w) != 1 || !strings.HasPrefix(w[0], "subsystems[0].cntlid_max: controller IDs 1..100 leave room for another daemon") {
		t.Fatalf("warnings %q, want the shared subsystem's", w)
	}
}

func TestGatewayValidate(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"no pool", "  pool: rbd\n", "", "gateway.pool: required: the pool that holds the lease objects"},
		{"no groups", "  groups: [1]\n", "", "gateway.groups: required: the ANA groups the lease decides"},
		{"group range", "groups: [1]", "groups: [1, 0, 1]", "gateway.groups[1].id: 0 is out of range 1..128\ngateway.groups[2].id: group 1 is listed twice"},
		{"group form", "groups: [1]", "groups: [{id: 1, preferred: gw-a}, {preferred: gw-b}, {id: 1}]",
			"gateway.groups[1].id: 0 is out of range 1..128\ngateway.groups[2].id: group 1 is listed twice"},
		{"preferred name", "groups: [1]", "groups: [{id: 1, preferred: gw a}]",
			`gateway.groups[0].preferred: "gw a" must be a gateway name: printable ASCII without spaces or /, at most 64 bytes`},
		{"group key", "groups: [1]", "groups: [{id: 1, prefered: gw-a}]", `parse: line 6: unknown gateway group key "prefered" (want id, preferred)`},
		{"failback delay range", "  pool: rbd\n", "  pool: rbd\n  failback_delay: -2\n", "gateway.failback_delay: -2 is out of range 1..3600 seconds (-1: never hand a group back)"},
		{"rebalance range", "  pool: rbd\n", "  pool: rbd\n  balance: true\n  rebalance_seconds: 3601\n", "gateway.rebalance_seconds: 3601 is out of range 1..3600"},
		{"balance without failback", "  pool: rbd\n", "  pool: rbd\n  balance: true\n  failback_delay: -1\n", "gateway.balance: balancing moves groups by failback"},
		{"lease", "  pool: rbd\n", "  pool: rbd\n  lease_seconds: 1\n", "gateway.lease_seconds: 1 is out of range 3..300"},
		{"name", "name: gw-a", "name: gw a", `gateway.name: "gw a" must be printable ASCII without spaces or /, at most 64 bytes`},
		{"prefix", "  pool: rbd\n", "  pool: rbd\n  lease_prefix: a/b\n", `gateway.lease_prefix: "a/b" must be printable ASCII without spaces, / or @, at most 200 bytes`},
		{"port sets a gateway group", "address: 10.0.0.1}", "address: 10.0.0.1, ana: {1: optimized, 2: inaccessible}}",
			"ports[0].ana[1]: ANA group 1 is a gateway group: its state on every port follows the gateway lease (optimized here while this daemon owns it, inaccessible otherwise); remove it from the port"},
		{"not rbd", "groups: [1]", "groups: [1, 2]",
			"subsystems[0].namespaces[1].backend: nullblk namespace in gateway group 2: only rbd namespaces can be fenced when a gateway takes a group over; use rbd or another ANA group"},
		{"another cluster connection", "image: vol1,", "image: vol1, ceph: {user: other},", "subsystems[0].namespaces[0].ceph: in gateway group 1"},
		{"rbd outside the gateway groups", "groups: [1]", "groups: [3]",
			"subsystems[0].namespaces[0].ana_group: rbd namespace in ANA group 1, which is not a gateway group (gateway.groups: [3])"},
		{"gateway ceph", "  pool: rbd\n", "  pool: rbd\n  ceph: {keyring: rel}\n", `gateway.ceph.keyring: "rel" must be an absolute path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.Replace(gatewayYAML, tc.from, tc.to, 1)
			if y == gatewayYAML {
				t.Fatal("the case changes nothing")
			}
			_, err := Parse([]byte(y))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got\n%v\nwant\n%s", err, tc.want)
			}
		})
	}
}

// The gateway pair's examples are one subsystem and one lease to hosts and
// to the cluster: the same subsystem section but for disjoint controller
// ID ranges, the same gateway block but for the name.
func TestGatewayExamplesAgree(t *testing.T) {
	cs := oneSubsystemPair(t, "examples/gateway-a.yaml", "examples/gateway-b.yaml")
	ga, gb := *cs[0].Gateway, *cs[1].Gateway
	if ga.Name == gb.Name {
		t.Errorf("both gateways are named %q", ga.Name)
	}
	ga.Name = gb.Name
	if !reflect.DeepEqual(ga, gb) {
		t.Errorf("gateway blocks differ:\n%+v\n%+v", ga, gb)
	}
}

// The group list takes plain IDs and {id, preferred} mixed, and writes a
// group without a preferred gateway back as its ID.
func TestGatewayGroupForms(t *testing.T) {
	y := strings.Replace(gatewayYAML, "groups: [1]", "groups: [{id: 1, preferred: gw-b}, 2]\n  failback_delay: 30", 1)
	y = strings.Replace(y, "backend: nullblk, size: 1GiB, ana_group: 2", "backend: rbd, pool: rbd, image: vol2, ana_group: 2", 1)
	c, err := Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	g := c.Gateway
	if want := []GatewayGroup{{ID: 1, Preferred: "gw-b"}, {ID: 2}}; !reflect.DeepEqual(g.Groups, want) || g.FailbackDelay != 30 {
		t.Fatalf("groups %+v, failback delay %d", g.Groups, g.FailbackDelay)
	}
	if g.Preferred(1) != "gw-b" || g.Preferred(2) != "" || !g.HasGroup(2) || g.HasGroup(3) {
		t.Errorf("preferred %q/%q", g.Preferred(1), g.Preferred(2))
	}
	out, err := yaml.Marshal(g.Groups)
	if err != nil || string(out) != "- id: 1\n  preferred: gw-b\n- 2\n" {
		t.Errorf("marshalled %q, %v", out, err)
	}
}
