package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// The add_, set_ and remove_ methods: each edits a copy of the running
// configuration and hands it to apply, which validates it as a reload
// would. They check only what validation cannot: that what they name
// exists, or does not yet.

// PortParams is a port as the configuration file's ports[] entry has it.
type PortParams struct {
	ID             uint16  `json:"id"`
	Transport      string  `json:"transport,omitempty"` // rdma (default) or tcp
	Address        string  `json:"address"`
	Port           *uint16 `json:"port,omitempty"`             // default 4420
	InlineDataSize *uint32 `json:"inline_data_size,omitempty"` // default config.DefaultInlineDataSize
	MaxQueueSize   *uint16 `json:"max_queue_size,omitempty"`   // default config.DefaultMaxQueueSize
	// ANA is the state of each ANA group on the port that is not
	// optimized (non_optimized, inaccessible, persistent_loss, change).
	ANA map[uint32]string `json:"ana,omitempty"`
	// Referrals are other ports, possibly another daemon's, that the
	// port's discovery log lists.
	Referrals []Referral `json:"referrals,omitempty"`
}

// ANAParams sets the ANA state of one group on one port.
type ANAParams struct {
	Port  uint16 `json:"port"`
	Group uint32 `json:"group"`
	State string `json:"state"` // optimized, non_optimized, inaccessible, persistent_loss, change
}

type PortRef struct {
	ID uint16 `json:"id"`
}

type SubsystemParams struct {
	NQN          string `json:"nqn"`
	Serial       string `json:"serial,omitempty"`
	Model        string `json:"model,omitempty"`
	AllowAnyHost bool   `json:"allow_any_host,omitempty"`
	// Hosts are NQNs, or objects with the NQN and DH-HMAC-CHAP keys
	// as in the configuration file.
	Hosts          []config.Host `json:"hosts,omitempty"`
	Ports          []uint16      `json:"ports,omitempty"` // none: every port
	MaxControllers int           `json:"max_controllers,omitempty"`
	MaxIOQueues    int           `json:"max_io_queues,omitempty"`
	DHCHAPHashes   []string      `json:"dhchap_hashes,omitempty"`
	DHCHAPDHGroups []string      `json:"dhchap_dhgroups,omitempty"`
	CntlidMin      uint16        `json:"cntlid_min,omitempty"` // default 1
	CntlidMax      uint16        `json:"cntlid_max,omitempty"` // default 65519
}

// SubsystemSet changes what is given and keeps the rest.
type SubsystemSet struct {
	NQN            string    `json:"nqn"`
	AllowAnyHost   *bool     `json:"allow_any_host,omitempty"`
	Ports          *[]uint16 `json:"ports,omitempty"`
	MaxControllers *int      `json:"max_controllers,omitempty"`
	MaxIOQueues    *int      `json:"max_io_queues,omitempty"`
	CntlidMin      *uint16   `json:"cntlid_min,omitempty"`
	CntlidMax      *uint16   `json:"cntlid_max,omitempty"`
}

type SubsystemRef struct {
	NQN string `json:"nqn"`
}

type NamespaceParams struct {
	NQN       string   `json:"nqn"`
	NSID      uint32   `json:"nsid,omitempty"` // 0: the lowest free NSID
	Backend   string   `json:"backend"`
	Path      string   `json:"path,omitempty"`
	Size      ByteSize `json:"size,omitempty"`
	BlockSize uint32   `json:"block_size,omitempty"`
	ReadOnly  bool     `json:"read_only,omitempty"`
	Buffered  bool     `json:"buffered,omitempty"`
	UUID      string   `json:"uuid,omitempty"`
	ANAGroup  uint32   `json:"ana_group,omitempty"` // default 1
	// Reservations: the NVMe reservation commands (left out: on).
	Reservations *bool `json:"reservations,omitempty"`
	// rbd: the image; the cluster is the top-level ceph block's.
	Pool           string `json:"pool,omitempty"`
	RadosNamespace string `json:"rados_namespace,omitempty"`
	Image          string `json:"image,omitempty"`
	Create         bool   `json:"create,omitempty"`
	// Hosts limits the namespace: left out, every allowed host sees it;
	// [], none.
	Hosts *[]string `json:"hosts,omitempty"`
}

type NamespaceSet struct {
	NQN      string    `json:"nqn"`
	NSID     uint32    `json:"nsid"`
	Size     *ByteSize `json:"size,omitempty"`
	ANAGroup *uint32   `json:"ana_group,omitempty"`
	Hosts    *[]string `json:"hosts,omitempty"`
	// Reservations turns the reservation commands on or off in place.
	Reservations *bool `json:"reservations,omitempty"`

	QoS *QoSParams `json:"qos,omitempty"` // the limits to change (qos.go)
}

type NamespaceRef struct {
	NQN  string `json:"nqn"`
	NSID uint32 `json:"nsid"`
}

type HostParams struct {
	NQN  string `json:"nqn"`
	Host string `json:"host"`
	// DH-HMAC-CHAP secrets, inline or by file, and the host's hash and
	// group lists, as in the configuration; set_host replaces them all
	// (left out: none).
	DHCHAPKey         string   `json:"dhchap_key,omitempty"`
	DHCHAPKeyFile     string   `json:"dhchap_key_file,omitempty"`
	DHCHAPCtrlKey     string   `json:"dhchap_ctrl_key,omitempty"`
	DHCHAPCtrlKeyFile string   `json:"dhchap_ctrl_key_file,omitempty"`
	DHCHAPHashes      []string `json:"dhchap_hashes,omitempty"`
	DHCHAPDHGroups    []string `json:"dhchap_dhgroups,omitempty"`
	// The configured PSK of NVMe/TCP's TLS, inline or by file, and how
	// the host derives from it.
	TLSKey        string `json:"tls_key,omitempty"`
	TLSKeyFile    string `json:"tls_key_file,omitempty"`
	TLSDerivation string `json:"tls_derivation,omitempty"`
}

// entry is the configuration's host entry for p.
func (p HostParams) entry() config.Host {
	return config.Host{NQN: p.Host, DHCHAPKey: p.DHCHAPKey, DHCHAPKeyFile: p.DHCHAPKeyFile,
		DHCHAPCtrlKey: p.DHCHAPCtrlKey, DHCHAPCtrlKeyFile: p.DHCHAPCtrlKeyFile,
		DHCHAPHashes: p.DHCHAPHashes, DHCHAPDHGroups: p.DHCHAPDHGroups,
		TLSKey: p.TLSKey, TLSKeyFile: p.TLSKeyFile, TLSDerivation: p.TLSDerivation}
}

// ByteSize is a size parameter: a byte count, or a string such as
// "64MiB" as the configuration file takes.
type ByteSize int64

func (b *ByteSize) UnmarshalJSON(data []byte) error {
	return byteParam(data, b, "size", "size", `a byte count or a string such as "1GiB"`, config.ParseSize)
}

// byteParam reads into v a parameter of bytes: a JSON integer, or a
// string parse takes, as the configuration file does. null leaves v
// alone, as encoding/json leaves a value it has no data for. field is the
// parameter the errors name; a fraction is refused as what, with what
// the parameter takes (want).
func byteParam[V, P ~int64](data []byte, v *V, field, what, want string, parse func(string) (P, error)) error {
	s := string(data)
	switch {
	case s == "null":
		return nil
	case data[0] == '"':
		if err := json.Unmarshal(data, &s); err != nil {
			return paramError(field, "invalid params: %s: %v", field, err)
		}
	case bytes.ContainsAny(data, ".eE"):
		return paramError(field, "invalid params: %s %s: want %s", what, data, want)
	}
	n, err := parse(s)
	if err != nil {
		return paramError(field, "invalid params: %s: %v", field, err)
	}
	*v = V(n)
	return nil
}

func orDefault[T any](p *T, def T) T {
	if p != nil {
		return *p
	}
	return def
}

// findSubsystem returns the index of subsystem nqn in c.
func findSubsystem(c *config.Config, nqn string) (int, error) {
	if nqn == "" {
		return -1, paramError("nqn", "invalid params: nqn is required")
	}
	for i := range c.Subsystems {
		if c.Subsystems[i].NQN == nqn {
			return i, nil
		}
	}
	return -1, notFound("nqn", "no subsystem %s", nqn)
}

func (s *session) addPort(p PortParams) (ChangeResult, error) {
	return s.api.change(func(c *config.Config) (string, error) {
		if slices.ContainsFunc(c.Ports, func(q config.Port) bool { return q.ID == p.ID }) {
			return "", alreadyExists("id", "port %d already exists", p.ID)
		}
		port := config.Port{
			ID: p.ID, Transport: p.Transport, Address: p.Address,
			Port:         orDefault(p.Port, config.DefaultServiceID),
			MaxQueueSize: orDefault(p.MaxQueueSize, config.DefaultMaxQueueSize),
			ANA:          p.ANA,
		}
		for _, r := range p.Referrals {
			port.Referrals = append(port.Referrals, config.Referral{Transport: r.Transport, Address: r.Address, Port: r.Port})
		}
		// An explicit 0 turns in-capsule data off; only a size set this
		// way survives the defaults a reload applies.
		port.SetInlineDataSize(orDefault(p.InlineDataSize, config.DefaultInlineDataSize))
		c.Ports = append(c.Ports, port)
		return fmt.Sprintf("ports[%d]", len(c.Ports)-1), nil
	})
}

// removePort also takes the port off every subsystem's list. A subsystem
// served on this port alone would be served on every port instead, so
// that is refused.
func (s *session) removePort(p PortRef) (ChangeResult, error) {
	return s.api.change(func(c *config.Config) (string, error) {
		n := len(c.Ports)
		c.Ports = slices.DeleteFunc(c.Ports, func(q config.Port) bool { return q.ID == p.ID })
		if len(c.Ports) == n {
			return "", notFound("id", "no port %d", p.ID)
		}
		for i := range c.Subsystems {
			sc := &c.Subsystems[i]
			if slices.Equal(sc.Ports, []uint16{p.ID}) {
				return "", newError(CodeInUse, fmt.Sprintf("port %d is the only port of subsystem %s: give it another port or remove it first", p.ID, sc.NQN), &ErrorData{Field: "id"})
			}
			sc.Ports = slices.DeleteFunc(sc.Ports, func(id uint16) bool { return id == p.ID })
		}
		return "", nil
	})
}

// setANAState changes the ANA state of a group on a port in place: hosts
// connected through the port keep their connections and get an ANA change
// event. Optimized, the default, leaves the group out of the port's list.
func (s *session) setANAState(p ANAParams) (ChangeResult, error) {
	if p.Group < 1 || p.Group > nvme.MaxANAGroups {
		return ChangeResult{}, paramError("group", "invalid params: group %d is out of range 1..%d", p.Group, nvme.MaxANAGroups)
	}
	if !slices.Contains(config.ANAStates, p.State) {
		return ChangeResult{}, paramError("state", "invalid params: state %q: want one of %s", p.State, strings.Join(config.ANAStates, ", "))
	}
	return s.api.change(func(c *config.Config) (string, error) {
		i := slices.IndexFunc(c.Ports, func(q config.Port) bool { return q.ID == p.Port })
		if i < 0 {
			return "", notFound("port", "no port %d", p.Port)
		}
		pc := &c.Ports[i]
		if p.State == config.ANAOptimized {
			delete(pc.ANA, p.Group)
		} else {
			if pc.ANA == nil {
				pc.ANA = map[uint32]string{}
			}
			pc.ANA[p.Group] = p.State
		}
		return fmt.Sprintf("ports[%d].ana[%d]", i, p.Group), nil
	})
}

func (s *session) addSubsystem(p SubsystemParams) (ChangeResult, error) {
	return s.api.change(func(c *config.Config) (string, error) {
		if slices.ContainsFunc(c.Subsystems, func(x config.Subsystem) bool { return x.NQN == p.NQN }) {
			return "", alreadyExists("nqn", "subsystem %s already exists", p.NQN)
		}
		c.Subsystems = append(c.Subsystems, config.Subsystem{
			NQN: p.NQN, Serial: p.Serial, Model: p.Model, AllowAnyHost: p.AllowAnyHost,
			Hosts: p.Hosts, Ports: p.Ports, MaxControllers: p.MaxControllers, MaxIOQueues: p.MaxIOQueues,
			DHCHAPHashes: p.DHCHAPHashes, DHCHAPDHGroups: p.DHCHAPDHGroups,
			CntlidMin: p.CntlidMin, CntlidMax: p.CntlidMax,
		})
		return fmt.Sprintf("subsystems[%d]", len(c.Subsystems)-1), nil
	})
}

func (s *session) setSubsystem(p SubsystemSet) (ChangeResult, error) {
	if p.AllowAnyHost == nil && p.Ports == nil && p.MaxControllers == nil && p.MaxIOQueues == nil && p.CntlidMin == nil && p.CntlidMax == nil {
		return ChangeResult{}, paramError("params", "invalid params: nothing to set (allow_any_host, ports, max_controllers, max_io_queues, cntlid_min, cntlid_max)")
	}
	return s.api.change(func(c *config.Config) (string, error) {
		i, err := findSubsystem(c, p.NQN)
		if err != nil {
			return "", err
		}
		sc := &c.Subsystems[i]
		sc.AllowAnyHost = orDefault(p.AllowAnyHost, sc.AllowAnyHost)
		sc.Ports = orDefault(p.Ports, sc.Ports)
		sc.MaxControllers = orDefault(p.MaxControllers, sc.MaxControllers)
		sc.MaxIOQueues = orDefault(p.MaxIOQueues, sc.MaxIOQueues)
		sc.CntlidMin = orDefault(p.CntlidMin, sc.CntlidMin)
		sc.CntlidMax = orDefault(p.CntlidMax, sc.CntlidMax)
		return fmt.Sprintf("subsystems[%d]", i), nil
	})
}

func (s *session) removeSubsystem(p SubsystemRef) (ChangeResult, error) {
	return s.api.change(func(c *config.Config) (string, error) {
		i, err := findSubsystem(c, p.NQN)
		if err != nil {
			return "", err
		}
		c.Subsystems = slices.Delete(c.Subsystems, i, i+1)
		return "", nil
	})
}
