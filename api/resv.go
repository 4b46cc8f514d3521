package api

import (
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
