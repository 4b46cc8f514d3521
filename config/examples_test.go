package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestExamples keeps the shipped examples loadable: each must pass the
// same strict parse and validation `nvmeof-tgt -check` applies.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Guards against the directory moving or the files being renamed,
	// which would otherwise leave nothing to test.
	if len(files) < 4 {
		t.Fatalf("found %d examples in examples/, want at least 4: %q", len(files), files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Parse(data)
			if err != nil {
				t.Fatalf("%s:\n%v", f, err)
			}
			if len(c.Ports) == 0 || len(c.Subsystems) == 0 {
				t.Fatalf("%s: an example should serve at least one subsystem on one port", f)
			}
			checkExampleHeader(t, f, string(data), c)
			for _, w := range c.Warnings() {
				t.Errorf("%s: -check warns: %s", f, w)
			}
		})
	}
}

// checkExampleHeader: an example either starts as installed or says at
// its top what to edit, and marks each value to edit on its line. Port
// addresses always need editing; a block device is named by
// /dev/disk/by-id, as docs/configuration.md recommends.
func checkExampleHeader(t *testing.T, name, text string, c *Config) {
	t.Helper()
	var header []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		header = append(header, line)
	}
	if !strings.Contains(strings.Join(header, "\n"), "Edit before use:") {
		t.Errorf("%s: the leading comment does not say what to edit (\"Edit before use:\")", name)
	}
	for _, p := range c.Ports {
		if !markedEdit(text, "address: "+p.Address) {
			t.Errorf("%s: port %d's address %s is not marked # EDIT", name, p.ID, p.Address)
		}
	}
	for _, s := range c.Subsystems {
		for _, ns := range s.Namespaces {
			if ns.Backend != "block" {
				continue
			}
			if !strings.HasPrefix(ns.Path, "/dev/disk/by-id/") {
				t.Errorf("%s: block namespace %d uses %s, not a /dev/disk/by-id/ name", name, ns.NSID, ns.Path)
			}
			if !markedEdit(text, "path: "+ns.Path) {
				t.Errorf("%s: block device path %s is not marked # EDIT", name, ns.Path)
			}
		}
	}
}

// markedEdit reports whether every line of text holding value carries an
// "# EDIT" comment, and there is at least one.
func markedEdit(text, value string) bool {
	found := false
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, value) && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			if !strings.Contains(line, "# EDIT") {
				return false
			}
			found = true
		}
	}
	return found
}

// TestHAExamplesAgree keeps the two daemons of the HA example one
// subsystem to hosts: the same subsystem section but for disjoint
// controller ID ranges, and each port referring to the other.
func TestHAExamplesAgree(t *testing.T) {
	cs := oneSubsystemPair(t, "examples/ha-daemon-a.yaml", "examples/ha-daemon-b.yaml")
	pa, pb := cs[0].Ports[0], cs[1].Ports[0]
	if len(pa.Referrals) != 1 || pa.Referrals[0].Address != pb.Address || len(pb.Referrals) != 1 || pb.Referrals[0].Address != pa.Address {
		t.Errorf("referrals %+v and %+v do not point at each other's port", pa.Referrals, pb.Referrals)
	}
}

// oneSubsystemPair parses the examples of two daemons that serve one
// subsystem and checks that hosts see one: the same first subsystem
// section but for disjoint controller ID ranges.
func oneSubsystemPair(t *testing.T, fa, fb string) [2]*Config {
	t.Helper()
	var cs [2]*Config
	for i, f := range []string{fa, fb} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if cs[i], err = Parse(data); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	a, b := cs[0].Subsystems[0], cs[1].Subsystems[0]
	aLo, aHi := a.CntlidRange()
	bLo, bHi := b.CntlidRange()
	if aHi >= bLo && bHi >= aLo {
		t.Errorf("controller ID ranges %d..%d and %d..%d overlap", aLo, aHi, bLo, bHi)
	}
	a.CntlidMin, a.CntlidMax, b.CntlidMin, b.CntlidMax = 0, 0, 0, 0
	if !reflect.DeepEqual(a, b) {
		t.Errorf("subsystem sections differ:\n%+v\n%+v", a, b)
	}
	return cs
}
