package config

import (
	"fmt"
	"reflect"
	"testing"
)

func mustParse(t *testing.T, y string) *Config {
	t.Helper()
	c, err := Parse([]byte(y))
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	return c
}

// oneSubsystem is a configuration of one RDMA port and one subsystem,
// nqn.2026-11.io.example:a, open to any host, with the namespaces given
// in YAML: a flow list, or the lines of a block list.
func oneSubsystem(namespaces string) string {
	return `
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - nqn: nqn.2026-11.io.example:a
    allow_any_host: true
    namespaces: ` + namespaces + "\n"
}

// roundTrip writes c out and parses it back.
func roundTrip(t *testing.T, c *Config) *Config {
	t.Helper()
	out, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out)
	if err != nil {
		t.Fatalf("re-parse: %v\n%s", err, out)
	}
	return back
}

func nsids(refs []NamespaceRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.NQN+"/"+string(rune('0'+r.NSID)))
	}
	return out
}

func TestDiff(t *testing.T) {
	cur := mustParse(t, `
ports: [{id: 1, address: 10.0.0.1}, {id: 2, address: 10.0.0.2}]
subsystems:
  - nqn: nqn.2026-11.io.example:same
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}, {nsid: 2, backend: block, path: /dev/vdb}]
  - nqn: nqn.2026-11.io.example:edit
    hosts: [nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000001]
    namespaces:
      - {nsid: 1, backend: nullblk, size: 1GiB}
      - {nsid: 2, backend: nullblk, size: 1GiB}
      - {nsid: 3, backend: nullblk, size: 1GiB}
  - nqn: nqn.2026-11.io.example:serial
    allow_any_host: true
    namespaces: []
  - nqn: nqn.2026-11.io.example:gone
    allow_any_host: true
    namespaces: []
`)
	next := mustParse(t, `
ports: [{id: 1, address: 10.0.0.1}, {id: 2, address: 10.0.0.2, port: 4421}, {id: 3, address: 10.0.0.3}]
subsystems:
  - nqn: nqn.2026-11.io.example:same
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}, {nsid: 2, backend: block, path: /dev/vdb}]
  - nqn: nqn.2026-11.io.example:edit
    allow_any_host: true
    ports: [1]
    namespaces:
      - {nsid: 1, backend: nullblk, size: 2GiB}
      - {nsid: 2, backend: nullblk, size: 1GiB, read_only: true}
      - {nsid: 4, backend: nullblk, size: 1GiB}
  - nqn: nqn.2026-11.io.example:serial
    serial: "42"
    allow_any_host: true
    namespaces: []
  - nqn: nqn.2026-11.io.example:new
    allow_any_host: true
    namespaces: []
`)
	p := Diff(cur, next)
	ports := func(ps []Port) (ids []uint16) {
		for _, x := range ps {
			ids = append(ids, x.ID)
		}
		return
	}
	subs := func(ss []Subsystem) (n []string) {
		for _, x := range ss {
			n = append(n, x.NQN)
		}
		return
	}
	for what, got := range map[string][2]any{
		"deleted ports":      {ports(p.DelPorts), []uint16{2}},
		"added ports":        {ports(p.AddPorts), []uint16{2, 3}},
		"deleted subsystems": {subs(p.DelSubsystems), []string{"nqn.2026-11.io.example:serial", "nqn.2026-11.io.example:gone"}},
		"added subsystems":   {subs(p.AddSubsystems), []string{"nqn.2026-11.io.example:serial", "nqn.2026-11.io.example:new"}},
		"access":             {subs(p.Access), []string{"nqn.2026-11.io.example:edit"}},
		"links":              {subs(p.Links), []string{"nqn.2026-11.io.example:edit"}},
		"deleted namespaces": {nsids(p.DelNamespaces), []string{"nqn.2026-11.io.example:edit/2", "nqn.2026-11.io.example:edit/3"}},
		"added namespaces":   {nsids(p.AddNamespaces), []string{"nqn.2026-11.io.example:edit/2", "nqn.2026-11.io.example:edit/4"}},
		"resized namespaces": {nsids(p.ResizeNamespaces), []string{"nqn.2026-11.io.example:edit/1"}},
		"remeasured":         {nsids(p.Remeasure), []string{"nqn.2026-11.io.example:same/2"}},
	} {
		if !reflect.DeepEqual(got[0], got[1]) {
			t.Errorf("%s: got %v, want %v", what, got[0], got[1])
		}
	}
	if empty := Diff(next, next); !reflect.DeepEqual(empty, Plan{Remeasure: empty.Remeasure}) || len(empty.Remeasure) != 1 {
		t.Errorf("a configuration against itself: %+v", empty)
	}
}

// A kept subsystem whose limits change is listed for them alone: its
// controllers and namespaces stay.
func TestDiffLimits(t *testing.T) {
	base := `
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - nqn: nqn.2026-11.io.example:a
    allow_any_host: true
%s
    namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]
  - nqn: nqn.2026-11.io.example:b
    allow_any_host: true
`
	cur := mustParse(t, fmt.Sprintf(base, ""))
	next := mustParse(t, fmt.Sprintf(base, "    max_controllers: 4\n    max_io_queues: 2"))
	p := Diff(cur, next)
	if len(p.Limits) != 1 || p.Limits[0].NQN != "nqn.2026-11.io.example:a" || p.Limits[0].MaxControllers != 4 || p.Limits[0].MaxIOQueues != 2 {
		t.Fatalf("limits changed: %+v", p.Limits)
	}
	if len(p.DelSubsystems)+len(p.AddSubsystems)+len(p.DelNamespaces)+len(p.AddNamespaces) != 0 {
		t.Fatalf("a limit change rebuilds: %+v", p)
	}
	if p := Diff(cur, cur); len(p.Limits) != 0 {
		t.Fatalf("no change, limits listed: %+v", p.Limits)
	}
}

func TestDiffKeepsListenerOnANAAndReferrals(t *testing.T) {
	cur := mustParse(t, `
ports: [{id: 1, address: 10.0.0.1}, {id: 2, address: 10.0.0.2}]
`)
	next := mustParse(t, `
ports:
  - {id: 1, address: 10.0.0.1, ana: {1: inaccessible, 2: non_optimized}}
  - {id: 2, address: 10.0.0.2, referrals: [{address: 10.0.0.9}]}
`)
	p := Diff(cur, next)
	if len(p.DelPorts)+len(p.AddPorts) != 0 {
		t.Fatalf("listeners restarted: del %v add %v", p.DelPorts, p.AddPorts)
	}
	if len(p.ANAPorts) != 1 || p.ANAPorts[0].ID != 1 || p.ANAPorts[0].ANAState(1) != ANAInaccessible {
		t.Fatalf("ANAPorts = %+v", p.ANAPorts)
	}
	if len(p.ReferralPorts) != 1 || p.ReferralPorts[0].ID != 2 || p.ReferralPorts[0].Referrals[0].Port != DefaultServiceID {
		t.Fatalf("ReferralPorts = %+v", p.ReferralPorts)
	}
	if q := Diff(next, next.Clone()); len(q.ANAPorts)+len(q.ReferralPorts)+len(q.AddPorts) != 0 {
		t.Fatalf("identical configurations differ: %+v", q)
	}
}

// TestSameListenerCoversPort fails when Port gains a field SameListener
// does not compare: a new listener setting must restart the port.
func TestSameListenerCoversPort(t *testing.T) {
	base := Port{ID: 1, Transport: "rdma", Address: "10.0.0.1", Port: 4420, InlineDataSize: 8192, MaxQueueSize: 128}
	typ := reflect.TypeOf(base)
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		p := base
		v := reflect.ValueOf(&p).Elem().Field(i)
		v = reflect.NewAt(v.Type(), v.Addr().UnsafePointer()).Elem() // unexported fields too
		switch v.Kind() {
		case reflect.Map:
			v.Set(reflect.MakeMap(v.Type()))
			v.SetMapIndex(reflect.ValueOf(uint32(1)), reflect.ValueOf(ANAInaccessible))
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		case reflect.String:
			v.SetString("x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		default:
			v.SetUint(v.Uint() + 1)
		}
		live := f.Name == "ANA" || f.Name == "Referrals"
		if base.SameListener(p) != live {
			t.Errorf("field %s: SameListener = %v", f.Name, base.SameListener(p))
		}
		if base.Equal(p) {
			t.Errorf("field %s: Equal ignores it", f.Name)
		}
	}
}

// A namespace moved to another ANA group stays, moved in place, also when
// it is resized at once; group 1 written out is the default group.
func TestDiffRegroupsInPlace(t *testing.T) {
	cur := mustParse(t, oneSubsystem(`
      - {nsid: 1, backend: nullblk, size: 1GiB}
      - {nsid: 2, backend: nullblk, size: 1GiB, ana_group: 2}
      - {nsid: 3, backend: nullblk, size: 1GiB}
      - {nsid: 4, backend: nullblk, size: 1GiB}`))
	next := mustParse(t, oneSubsystem(`
      - {nsid: 1, backend: nullblk, size: 1GiB, ana_group: 1}
      - {nsid: 2, backend: nullblk, size: 1GiB, ana_group: 3}
      - {nsid: 3, backend: nullblk, size: 2GiB, ana_group: 3}
      - {nsid: 4, backend: nullblk, size: 1GiB, read_only: true, ana_group: 3}`))
	p := Diff(cur, next)
	if got := nsids(p.Regroup); !reflect.DeepEqual(got, []string{"nqn.2026-11.io.example:a/2", "nqn.2026-11.io.example:a/3"}) {
		t.Errorf("Regroup = %v", got)
	}
	if got := nsids(p.ResizeNamespaces); !reflect.DeepEqual(got, []string{"nqn.2026-11.io.example:a/3"}) {
		t.Errorf("ResizeNamespaces = %v", got)
	}
	// Made read-only as well: deleted and added, in its new group.
	if got := nsids(p.AddNamespaces); !reflect.DeepEqual(got, []string{"nqn.2026-11.io.example:a/4"}) {
		t.Errorf("AddNamespaces = %v", got)
	}
	if len(p.DelNamespaces) != 1 {
		t.Errorf("DelNamespaces = %v", nsids(p.DelNamespaces))
	}
}
