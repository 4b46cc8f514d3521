package daemon

import (
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/ctl"
)

func TestCtlGatewayRelease(t *testing.T) {
	cmd, err := ctl.Parse([]string{"gateway", "release", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := cmd.Params.(api.GatewayParams); cmd.Method != "release_ana_group" || !ok || p.Group != 3 {
		t.Fatalf("%s %+v", cmd.Method, cmd.Params)
	}
	for _, args := range [][]string{{"gateway", "release", "0"}, {"gateway", "release", "x"}, {"gateway", "release"}} {
		if _, err := ctl.Parse(args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// A daemon without a gateway block has nothing to release.
func TestReleaseWithoutGateway(t *testing.T) {
	useFakeRDMA(t)
	d, err := Start(parse(t, baseConfig(t.TempDir(), "")), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop(0)
	if _, err := releaseGroup(t, d, 1); err == nil || !strings.Contains(err.Error(), "runs no gateway") {
		t.Fatalf("release: %v", err)
	}
	if st := api.StateOf(d); st.Gateway != nil {
		t.Fatalf("gateway state without a gateway: %+v", st.Gateway)
	}
}

func TestCtlListShowsGateway(t *testing.T) {
	st := api.State{Ports: []api.PortState{{ID: 1, Address: "10.0.0.1", Port: 4420, ANA: map[uint32]string{1: "inaccessible"}}},
		Gateway: &api.GatewayState{Name: "gw-b", Cookie: "gw-b.0a1b", Groups: []api.GatewayGroupState{
			{Group: 1, State: "blocklisted", Takeovers: 1, Fencings: 1, LastError: "blocklisted"},
			{Group: 2, State: "standby", Since: "2026-11-28T23:59:01.5Z", Takeovers: 2, Fencings: 0, Failbacks: 1, Rebuilds: 3}}}}
	out := ctlList(t, st)
	for _, want := range []string{"gateway gw-b  cookie gw-b.0a1b", "ANA group 1  blocklisted  takeovers 1, fencings 1  last error: blocklisted",
		"takeovers 2, fencings 0, failbacks 1, rebuilds 3, standby since 2026-11-28T23:59:01.5Z\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("ctl list lacks %q:\n%s", want, out)
		}
	}
}
