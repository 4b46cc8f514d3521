package ctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// showStateJSON prints get_state's result as it came, indented: fields a
// newer daemon adds pass through.
func showStateJSON(raw json.RawMessage, out io.Writer) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := out.Write(b.Bytes())
	return err
}

// ShowState prints get_state's result as aligned text for people.
func ShowState(raw json.RawMessage, out io.Writer) error {
	var st api.State
	if err := json.Unmarshal(raw, &st); err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "configuration generation %d\n", st.Generation)
	for _, p := range st.Ports {
		fmt.Fprintf(w, "port %d  %s %s\n", p.ID, transportOf(p.Transport), net.JoinHostPort(p.Address, strconv.Itoa(int(p.Port))))
		for _, g := range anaGroupsOn(st, p) {
			state := p.ANA[g]
			if state == "" {
				state = config.ANAOptimized
			}
			fmt.Fprintf(w, "  ANA group %d\t%s\n", g, state)
		}
		for _, r := range p.Referrals {
			fmt.Fprintf(w, "  referral\t%s %s\n", transportOf(r.Transport), net.JoinHostPort(r.Address, strconv.Itoa(int(r.Port))))
		}
	}
	for _, s := range st.Subsystems {
		ports := "all ports"
		if len(s.Ports) > 0 {
			ports = "ports " + fmt.Sprint(s.Ports)
		}
		access := "any host"
		if !s.AllowAnyHost {
			access = fmt.Sprintf("%d allowed hosts", len(s.Hosts))
		}
		if s.CntlidMin != nvme.MinControllerID || s.CntlidMax != nvme.MaxControllerID {
			ports += fmt.Sprintf(", controller IDs %d..%d", s.CntlidMin, s.CntlidMax)
		}
		fmt.Fprintf(w, "subsystem %s  %s, %s\n", termSafe(s.NQN), access, ports)
		for _, n := range s.Namespaces {
			fmt.Fprintf(w, "  namespace %d\t%s %s\t%s, %d-byte blocks%s\tuuid %s, ANA group %d%s\n", n.NSID, n.Backend, termSafe(n.Path),
				config.Size(n.SizeBytes), n.BlockSize, map[bool]string{true: ", read-only"}[n.ReadOnly], n.UUID, n.ANAGroup, listHosts(n.Hosts)+resvSummary(n)+qosText(n.QoS))
		}
		for _, h := range s.Hosts {
			auth := ""
			if slices.Contains(s.DHCHAPHosts, h) {
				auth = "\tauthenticates (DH-HMAC-CHAP)"
			}
			fmt.Fprintf(w, "  host %s%s\n", termSafe(h), auth)
		}
		for _, c := range s.Controllers {
			fmt.Fprintf(w, "  controller %d\t%s\tport %d, %d queues, since %s\n", c.CNTLID, termSafe(c.Host), c.Port, c.Queues, c.Created)
		}
	}
	showGatewayText(w, st.Gateway)
	return w.Flush()
}

// termSafe returns s as it is if it is printable ASCII, else quoted with
// escapes: a host NQN comes from the network (with allow_any_host, from
// anyone), and escape sequences in it must not reach the terminal.
func termSafe(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return strconv.QuoteToASCII(s)
		}
	}
	return s
}

// anaGroupsOn lists, ascending, the ANA groups port p serves a namespace
// of and those it gives a state.
func anaGroupsOn(st api.State, p api.PortState) []uint32 {
	groups := map[uint32]bool{}
	for g := range p.ANA {
		groups[g] = true
	}
	for _, s := range st.Subsystems {
		if len(s.Ports) > 0 && !slices.Contains(s.Ports, p.ID) {
			continue
		}
		for _, n := range s.Namespaces {
			groups[n.ANAGroup] = true
		}
	}
	return slices.Sorted(maps.Keys(groups))
}

// transportOf is a port's or a referral's transport, rdma when left out.
func transportOf(t string) string {
	if t == "" {
		return config.TransportRDMA
	}
	return termSafe(t)
}
