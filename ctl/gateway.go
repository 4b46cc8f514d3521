package ctl

import (
	"flag"
	"fmt"
	"io"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func gatewayReleaseFlags(*flag.FlagSet) func([]string) (*Command, error) {
	return func(pos []string) (*Command, error) {
		group, err := parseUint32(pos[0])
		if err != nil || group < 1 || group > nvme.MaxANAGroups {
			return nil, fmt.Errorf("ANA group %q: want a number from 1 to 128", pos[0])
		}
		return ctlEdit("release_ana_group", api.GatewayParams{Group: group})
	}
}

// showGatewayText is ctl list's gateway lines.
func showGatewayText(w io.Writer, g *api.GatewayState) {
	if g == nil {
		return
	}
	fmt.Fprintf(w, "gateway %s  cookie %s\n", g.Name, g.Cookie)
	for _, grp := range g.Groups {
		fmt.Fprintf(w, "  ANA group %d\t%s\ttakeovers %d, fencings %d", grp.Group, grp.State, grp.Takeovers, grp.Fencings)
		if grp.Failbacks != 0 {
			fmt.Fprintf(w, ", failbacks %d", grp.Failbacks)
		}
		if grp.Rebuilds != 0 {
			fmt.Fprintf(w, ", rebuilds %d", grp.Rebuilds)
		}
		if grp.Since != "" {
			fmt.Fprintf(w, ", %s since %s", grp.State, grp.Since)
		}
		if grp.LastError != "" {
			fmt.Fprintf(w, "\tlast error: %s", grp.LastError)
		}
		fmt.Fprintln(w)
	}
}
