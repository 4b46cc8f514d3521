package ctl

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
)

// resvSummary is what ctl list shows of a namespace's reservation.
func resvSummary(n api.NSState) string {
	r := n.Reservation
	switch {
	case !n.Reservations:
		return ", reservations off"
	case r == nil:
		return ""
	}
	s := fmt.Sprintf(", %d registrants (generation %d", r.Registrants, r.Generation)
	if r.PTPL {
		s += ", persistent"
	}
	s += ")"
	switch {
	case r.Type == 0:
	case r.Holder != "":
		s += fmt.Sprintf(", reservation type %d held by host %s", r.Type, r.Holder)
	default:
		s += fmt.Sprintf(", reservation type %d held by every registrant", r.Type)
	}
	return s
}

// optBool is a boolean flag that records whether it was given.
type optBool struct{ p **bool }

func (o optBool) String() string {
	if o.p == nil || *o.p == nil {
		return ""
	}
	return fmt.Sprint(**o.p)
}

func (o optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	*o.p = &v
	return nil
}

func (o optBool) IsBoolFlag() bool { return true }

func optBoolVar(fs *flag.FlagSet, p **bool, name, usage string) { fs.Var(optBool{p}, name, usage) }
