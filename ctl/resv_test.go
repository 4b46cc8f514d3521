package ctl

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
)

func TestResvSummary(t *testing.T) {
	cases := []struct {
		n    api.NSState
		want string
	}{
		{api.NSState{Reservations: false}, ", reservations off"},
		{api.NSState{Reservations: true}, ""},
		{api.NSState{Reservations: true, Reservation: &api.ResvState{Type: 1, Holder: "h", Registrants: 2, Generation: 4, PTPL: true}},
			", 2 registrants (generation 4, persistent), reservation type 1 held by host h"},
		{api.NSState{Reservations: true, Reservation: &api.ResvState{Type: 6, Registrants: 3, Generation: 1}},
			", 3 registrants (generation 1), reservation type 6 held by every registrant"},
	}
	for _, c := range cases {
		if got := resvSummary(c.n); got != c.want {
			t.Errorf("%+v: %q, want %q", c.n, got, c.want)
		}
	}
}
