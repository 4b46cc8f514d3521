package config

import (
	"strings"
	"testing"
)

// shared_reservations parses with its slot, survives Marshal, and is
// refused, naming the field, off the block backend, with a slot other
// than 0 or 1, or with reservations off.
func TestSharedReservationsKey(t *testing.T) {
	ns := func(keys string) string { return oneSubsystem("[{nsid: 1, " + keys + "}]") }
	c := mustParse(t, ns("backend: block, path: /dev/vdb, shared_reservations: {slot: 1}"))
	if s := c.Subsystems[0].Namespaces[0].SharedReservations; !s.On || s.Slot != 1 {
		t.Fatalf("parsed %+v", s)
	}
	out, err := Marshal(c)
	if err != nil || !strings.Contains(string(out), "shared_reservations:") {
		t.Fatalf("marshalled %s %v", out, err)
	}
	again := mustParse(t, string(out))
	if again.Subsystems[0].Namespaces[0].SharedReservations != c.Subsystems[0].Namespaces[0].SharedReservations {
		t.Fatalf("after a round trip: %+v", again.Subsystems[0].Namespaces[0].SharedReservations)
	}
	plain := mustParse(t, ns("backend: block, path: /dev/vdb"))
	if plain.Subsystems[0].Namespaces[0].SharedReservations.On {
		t.Fatal("left out is on")
	}
	if out, _ := Marshal(plain); strings.Contains(string(out), "shared_reservations") {
		t.Fatalf("left out, marshalled as %s", out)
	}
	for _, bad := range []struct{ keys, want string }{
		{"backend: file, path: /tmp/x, size: 1GiB, shared_reservations: {slot: 0}", "namespaces[0].shared_reservations: only for the block backend"},
		{"backend: block, path: /dev/vdb, shared_reservations: {slot: 2}", "namespaces[0].shared_reservations.slot: 2: want 0 on one daemon and 1 on the other"},
		{"backend: block, path: /dev/vdb, shared_reservations: {}", "namespaces[0].shared_reservations.slot: -1"},
		{"backend: block, path: /dev/vdb, reservations: false, shared_reservations: {slot: 0}", "namespaces[0].shared_reservations: needs reservations on"},
		{"backend: block, path: /dev/vdb, shared_reservations: {sloth: 0}", `unknown shared_reservations key "sloth"`},
	} {
		_, err := Parse([]byte(ns(bad.keys)))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v; want an error with %q", bad.keys, err, bad.want)
		}
	}
}
