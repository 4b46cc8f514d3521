package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
)

// switchOf is an optional API boolean as a configuration Switch.
func switchOf(b *bool) config.Switch {
	if b == nil {
		return config.SwitchDefault
	}
	return config.SwitchOf(*b)
}

// ResvState is a namespace's reservation in get_state.
type ResvState struct {
	Type        uint8  `json:"type"`             // 0: none held
	Holder      string `json:"holder,omitempty"` // host ID; every registrant holds types 5 and 6
	Registrants int    `json:"registrants"`
	Generation  uint32 `json:"generation"`
	PTPL        bool   `json:"ptpl"`
}

func resvState(ns *fabrics.Namespace) *ResvState {
	st := ns.Reservation()
	if st.Generation == 0 && len(st.Registrants) == 0 && !st.PTPL {
		return nil
	}
	out := &ResvState{Type: st.Type, Registrants: len(st.Registrants), Generation: st.Generation, PTPL: st.PTPL}
	if st.Type != 0 && st.Type < 5 {
		out.Holder = config.FormatUUID(st.Holder)
	}
	return out
}

// resvSummary is what ctl list shows of a namespace's reservation.
func resvSummary(n NSState) string {
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
