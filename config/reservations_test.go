package config

import (
	"strings"
	"testing"
)

// reservations defaults to on, parses as a boolean, survives Marshal, and
// changes in place on reload.
func TestReservationsKey(t *testing.T) {
	base := oneSubsystem("[{nsid: 1, backend: nullblk, size: 1GiB%s}]")
	on := mustParse(t, strings.Replace(base, "%s", "", 1))
	if !on.Subsystems[0].Namespaces[0].Reservations.On() {
		t.Fatal("reservations left out is off")
	}
	off := mustParse(t, strings.Replace(base, "%s", ", reservations: false", 1))
	if off.Subsystems[0].Namespaces[0].Reservations.On() {
		t.Fatal("reservations: false is on")
	}
	if _, err := Parse([]byte(strings.Replace(base, "%s", ", reservations: maybe", 1))); err == nil {
		t.Fatal("reservations: maybe parsed")
	}
	out, err := Marshal(off)
	if err != nil || !strings.Contains(string(out), "reservations: false") {
		t.Fatalf("marshalled %s %v", out, err)
	}
	p := Diff(on, off)
	if len(p.Reservations) != 1 || len(p.AddNamespaces) != 0 || len(p.DelNamespaces) != 0 {
		t.Fatalf("plan %+v: want the namespace kept and switched in place", p)
	}
	explicit := mustParse(t, strings.Replace(base, "%s", ", reservations: true", 1))
	if p := Diff(on, explicit); len(p.Reservations) != 0 || len(p.AddNamespaces) != 0 {
		t.Fatalf("left out to true: plan %+v, want no change", p)
	}
}
