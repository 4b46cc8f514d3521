package main

import (
	"testing"
)

func TestResvSummary(t *testing.T) {
	cases := []struct {
		n    NSState
		want string
	}{
		{NSState{Reservations: false}, ", reservations off"},
		{NSState{Reservations: true}, ""},
		{NSState{Reservations: true, Reservation: &ResvState{Type: 1, Holder: "h", Registrants: 2, Generation: 4, PTPL: true}},
			", 2 registrants (generation 4, persistent), reservation type 1 held by host h"},
		{NSState{Reservations: true, Reservation: &ResvState{Type: 6, Registrants: 3, Generation: 1}},
			", 3 registrants (generation 1), reservation type 6 held by every registrant"},
	}
	for _, c := range cases {
		if got := resvSummary(c.n); got != c.want {
			t.Errorf("%+v: %q, want %q", c.n, got, c.want)
		}
	}
}
