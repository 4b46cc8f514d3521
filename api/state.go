package api

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// State is get_state's result and what `ctl list -json` prints: the
// running target as hosts see it, with the controllers connected.
type State struct {
	Generation uint64      `json:"generation"`
	Ports      []PortState `json:"ports"`
	Subsystems []SubState  `json:"subsystems"`
	// Gateway is the ANA group leases, with a gateway block.
	Gateway *GatewayState `json:"gateway,omitempty"`
}

type PortState struct {
	ID        uint16 `json:"id"`
	Transport string `json:"transport"` // rdma or tcp
	Address   string `json:"address"`
	Port      uint16 `json:"port"`
	// ANA is the state of each ANA group not optimized on the port.
	ANA map[uint32]string `json:"ana,omitempty"`
	// Referrals are the other discovery services the port's discovery
	// log lists.
	Referrals []Referral `json:"referrals,omitempty"`
}

// Referral is a discovery service a port's discovery log lists.
type Referral struct {
	Transport string `json:"transport,omitempty"` // rdma (default) or tcp
	Address   string `json:"address"`
	Port      uint16 `json:"port,omitempty"` // default 4420
}

type SubState struct {
	NQN          string   `json:"nqn"`
	Serial       string   `json:"serial"`
	Model        string   `json:"model"`
	AllowAnyHost bool     `json:"allow_any_host"`
	Hosts        []string `json:"hosts"`
	// DHCHAPHosts are the hosts that must authenticate (their keys are
	// never shown).
	DHCHAPHosts []string    `json:"dhchap_hosts,omitempty"`
	Ports       []uint16    `json:"ports"`
	CntlidMin   uint16      `json:"cntlid_min"` // controller IDs handed out
	CntlidMax   uint16      `json:"cntlid_max"`
	Namespaces  []NSState   `json:"namespaces"`
	Controllers []CtrlState `json:"controllers"`
}

type NSState struct {
	NSID      uint32 `json:"nsid"`
	Backend   string `json:"backend"`
	Path      string `json:"path,omitempty"`
	SizeBytes uint64 `json:"size_bytes"`
	BlockSize uint32 `json:"block_size"`
	ReadOnly  bool   `json:"read_only"`
	UUID      string `json:"uuid"`
	ANAGroup  uint32 `json:"ana_group"`
	// Hosts is who sees the namespace: left out, every allowed host.
	Hosts *[]string `json:"hosts,omitempty"`
	// Reservations: the commands are on; Reservation is the state, when
	// any host registered.
	Reservations bool       `json:"reservations"`
	Reservation  *ResvState `json:"reservation,omitempty"`
	// QoS is the namespace's limits, if it has any (qos.go).
	QoS *QoSState `json:"qos,omitempty"`
}

type CtrlState struct {
	CNTLID  uint16 `json:"cntlid"`
	Host    string `json:"host"`
	Port    uint16 `json:"port"`
	Queues  int    `json:"queues"`
	Created string `json:"created"` // RFC 3339, UTC
}

// StateOf is get_state's view of the daemon.
func StateOf(d Daemon) State {
	cfg := d.Running()
	gen, _, _ := d.Generation()
	st := State{Generation: gen, Ports: []PortState{}, Subsystems: []SubState{}}
	for _, p := range cfg.Ports {
		ps := PortState{ID: p.ID, Transport: p.Transport, Address: p.Address, Port: p.Port, ANA: maps.Clone(p.ANA)}
		// Gateway groups: the state the lease gives them, on every port.
		for g, s := range d.Target().PinnedANAGroups() {
			if ps.ANA == nil {
				ps.ANA = map[uint32]string{}
			}
			ps.ANA[g] = s.String()
			if s == nvme.ANAOptimized {
				delete(ps.ANA, g)
			}
		}
		for _, r := range p.Referrals {
			ps.Referrals = append(ps.Referrals, Referral{r.Transport, r.Address, r.Port})
		}
		st.Ports = append(st.Ports, ps)
	}
	for _, sc := range cfg.Subsystems {
		if ss, ok := subsystemState(d.Target(), sc); ok {
			st.Subsystems = append(st.Subsystems, ss)
		}
	}
	st.Gateway = gatewayState(d.Gateway())
	return st
}

// subsystemState is what runs of subsystem sc; false if it does not run.
func subsystemState(t *fabrics.Target, sc config.Subsystem) (SubState, bool) {
	s := t.Subsystem(sc.NQN)
	if s == nil {
		return SubState{}, false
	}
	ss := SubState{NQN: s.NQN, Serial: s.Serial, Model: s.Model, AllowAnyHost: sc.AllowAnyHost,
		Hosts: sc.HostNQNs(), Ports: append([]uint16{}, sc.Ports...),
		Namespaces: []NSState{}, Controllers: []CtrlState{}}
	ss.CntlidMin, ss.CntlidMax = s.ControllerIDs()
	slices.Sort(ss.Hosts)
	for _, h := range sc.Hosts {
		if h.HasKey() {
			ss.DHCHAPHosts = append(ss.DHCHAPHosts, h.NQN)
		}
	}
	slices.Sort(ss.DHCHAPHosts)
	for _, nc := range sc.Namespaces {
		ns := s.Namespace(nc.NSID)
		if ns == nil {
			continue
		}
		ss.Namespaces = append(ss.Namespaces, NSState{NSID: ns.ID, Backend: nc.Backend, Path: nc.Source(),
			SizeBytes: ns.Blocks() << ns.BlockShift, BlockSize: 1 << ns.BlockShift, ReadOnly: ns.ReadOnly,
			UUID: config.FormatUUID(ns.UUID), ANAGroup: ns.ANAGroup(), Hosts: namespaceHosts(s, ns.ID),
			Reservations: ns.ReservationsEnabled(), Reservation: resvState(ns), QoS: qosState(ns)})
	}
	slices.SortFunc(ss.Namespaces, func(a, b NSState) int { return cmp.Compare(a.NSID, b.NSID) })
	for _, c := range s.Controllers() {
		var port uint16
		if c.Port != nil {
			port = c.Port.ID
		}
		ss.Controllers = append(ss.Controllers, CtrlState{c.ID, c.HostNQN, port, c.Queues(), c.Created.UTC().Format(time.RFC3339)})
	}
	return ss, true
}
