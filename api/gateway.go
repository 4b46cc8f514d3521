package api

import (
	"fmt"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/sirupsen/logrus"
)

// GatewayState is the gateway in get_state.
type GatewayState struct {
	Name   string              `json:"name"`
	Cookie string              `json:"cookie"`
	Groups []GatewayGroupState `json:"groups"`
}

type GatewayGroupState struct {
	Group uint32 `json:"group"`
	State string `json:"state"` // standby, owner or blocklisted
	// Preferred is the gateway the group fails back to (with balancing,
	// the one it is assigned to now), "" none.
	Preferred string `json:"preferred,omitempty"`
	Takeovers uint64 `json:"takeovers"`
	Fencings  uint64 `json:"fencings"`
	Failbacks uint64 `json:"failbacks"`
	Rebuilds  uint64 `json:"rebuilds"` // the group's client rebuilt after a blocklist
	LastError string `json:"last_error,omitempty"`
	// Since: when the group took its state here (RFC 3339, to the
	// nanosecond, UTC).
	Since string `json:"since,omitempty"`
}

// gatewayState is the gateway's state: nil without one.
func gatewayState(name, cookie string, runners []*gateway.Runner) *GatewayState {
	if runners == nil {
		return nil
	}
	out := &GatewayState{Name: name, Cookie: cookie, Groups: []GatewayGroupState{}}
	for _, r := range runners {
		st := r.Status()
		g := GatewayGroupState{Group: st.Group, State: st.State.String(), Preferred: st.Preferred,
			Takeovers: st.Takeovers, Fencings: st.Fencings, Failbacks: st.Failbacks, Rebuilds: st.Rebuilds, LastError: st.LastError}
		if !st.Since.IsZero() {
			g.Since = st.Since.UTC().Format(time.RFC3339Nano)
		}
		out.Groups = append(out.Groups, g)
	}
	return out
}

// GatewayParams names the group of release_ana_group.
type GatewayParams struct {
	Group uint32 `json:"group"`
}

type GatewayResult struct {
	Released bool `json:"released"`
}

// releaseANAGroup is the planned handover: the owner of the group makes
// it inaccessible here, then releases the lease, and a peer takes it at
// once, notified through the lease object (at the latest at its next try,
// within a quarter of the lease). Not the owner: an error.
func (s *session) releaseANAGroup(p GatewayParams) (GatewayResult, error) {
	name, _, runners := s.api.m.Gateway()
	if runners == nil {
		return GatewayResult{}, newError(CodeNotFound, "this daemon runs no gateway (no gateway block in its configuration at start)", &ErrorData{Field: "group"})
	}
	var r *gateway.Runner
	groups := make([]uint32, 0, len(runners))
	for _, gr := range runners {
		groups = append(groups, gr.Lease.Group)
		if gr.Lease.Group == p.Group {
			r = gr
		}
	}
	if r == nil {
		return GatewayResult{}, paramError("group", "invalid params: ANA group %d is not a gateway group (gateway.groups: %v)", p.Group, groups)
	}
	if !r.Release() {
		return GatewayResult{}, newError(CodeNotFound, fmt.Sprintf("this gateway does not own ANA group %d (it is %s here)", p.Group, r.Status().State), &ErrorData{Field: "group"})
	}
	s.api.log.WithFields(logrus.Fields{"ana_group": p.Group, "gateway": name}).Info("gateway released the ANA group: inaccessible here, lease released for a peer")
	return GatewayResult{Released: true}, nil
}
