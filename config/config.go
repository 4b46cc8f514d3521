package config

import (
	"fmt"
	"maps"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"gopkg.in/yaml.v3"
)

// Config is the whole configuration file.
type Config struct {
	Log       Log      `yaml:"log"`
	Metrics   Metrics  `yaml:"metrics"`
	Control   Control  `yaml:"control"`
	RXE       []string `yaml:"rxe,omitempty"` // netdevs to give a soft-RoCE link at start
	StateFile string   `yaml:"state_file"`    // the daemon's lifetime counters (SMART), across restarts
	Limits    Limits   `yaml:"limits"`
	RDMA      RDMA     `yaml:"rdma"`
	TCP       TCP      `yaml:"tcp"`
	// IOEngine runs file and block I/O: io_uring, threads (worker
	// goroutines), or auto (default: io_uring where the kernel allows it).
	// A change takes effect at restart.
	IOEngine string `yaml:"io_engine"`
	// Ceph is how rbd namespaces reach their cluster unless they say
	// otherwise in their own ceph block.
	Ceph Ceph `yaml:"ceph,omitempty"`
	// Gateway makes the daemon one of a gateway pair (gateway.go).
	Gateway    *Gateway    `yaml:"gateway,omitempty"`
	Ports      []Port      `yaml:"ports"`
	Subsystems []Subsystem `yaml:"subsystems"`
}

// Control configures the local admin socket `nvmeof-tgt ctl` talks to.
type Control struct {
	Socket string `yaml:"socket"` // Unix socket path (default DefaultControlSocket)
}

// Limits bound what hosts together may make the daemon allocate.
type Limits struct {
	// MaxQueuePairs is the most queue pairs (admin and I/O, every host,
	// every port) connected at once (default DefaultMaxQueuePairs).
	MaxQueuePairs int `yaml:"max_queue_pairs"`
	// UnconnectedPerAddress is the most queue pairs one peer address may
	// hold before their Connect command (default: half of
	// max_queue_pairs, at most DefaultUnconnectedPerAddress). A Linux
	// host opens all of a controller's I/O queues before it connects
	// them, so keep it above the subsystems' max_io_queues.
	UnconnectedPerAddress int `yaml:"unconnected_per_address"`
	// QueuePairsPerHost is the most queue pairs one host NQN may hold
	// connected, on every subsystem and port (default 0: no cap).
	QueuePairsPerHost int `yaml:"queue_pairs_per_host"`
}

// RDMA sizes the transport's shared resources. They are set up when the
// daemon starts; a reload that changes them takes effect at restart.
type RDMA struct {
	// BufferPool is the data buffer memory each RDMA device registers
	// and all its queue pairs share (default DefaultBufferPool): what
	// bounds the data in flight, not the number of queues.
	BufferPool Size `yaml:"buffer_pool"`
	// SharedReceiveQueue: queue pairs share a receive queue per device
	// where the device has them (default true).
	SharedReceiveQueue *bool `yaml:"shared_receive_queue"`
	// ReceiveQueueDepth is the entries of the shared receive queue:
	// commands in flight over all I/O queues of a device (default
	// DefaultReceiveQueueDepth, capped by the device).
	ReceiveQueueDepth int `yaml:"receive_queue_depth"`
	// PollerCPUs pins queue pair pollers to these CPUs in turn; empty
	// leaves them to the scheduler.
	PollerCPUs []int `yaml:"poller_cpus,omitempty"`
}

// Equal reports whether r and o configure the same resources.
func (r RDMA) Equal(o RDMA) bool {
	return r.BufferPool == o.BufferPool && r.SRQ() == o.SRQ() && r.ReceiveQueueDepth == o.ReceiveQueueDepth &&
		slices.Equal(r.PollerCPUs, o.PollerCPUs)
}

// SRQ is SharedReceiveQueue with its default.
func (r RDMA) SRQ() bool { return r.SharedReceiveQueue == nil || *r.SharedReceiveQueue }

// Log configures logrus.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error (default info)
	Format string `yaml:"format"` // text | json (default text)
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	Address string `yaml:"address"` // "" disables
}

// Port is one listening transport address.
type Port struct {
	ID        uint16 `yaml:"id"`
	Transport string `yaml:"transport"` // rdma (default) or tcp
	Address   string `yaml:"address"`   // IPv4 or IPv6 literal
	Port      uint16 `yaml:"port"`      // trsvcid (default 4420)
	// InlineDataSize is the in-capsule data each I/O command may carry
	// (default DefaultInlineDataSize when the key is left out; 0 written
	// out turns in-capsule data off).
	InlineDataSize uint32 `yaml:"inline_data_size"`
	MaxQueueSize   uint16 `yaml:"max_queue_size"`
	// ANA is the Asymmetric Namespace Access state of each ANA group on
	// this port (optimized, non_optimized, inaccessible, persistent_loss
	// or change). A group left out is optimized here.
	ANA map[uint32]string `yaml:"ana,omitempty"`
	// Referrals are other ports, possibly another daemon's, that this
	// port's discovery log lists so a host finds every path from one.
	Referrals []Referral `yaml:"referrals,omitempty"`
	// TLS is what an NVMe/TCP port asks of the secure channel: none (the
	// default), allowed or required (TLSModes).
	TLS string `yaml:"tls,omitempty"`

	// noInline records an explicit inline_data_size: 0, which
	// ApplyDefaults keeps, where a key left out gets the default. After
	// ApplyDefaults it is true exactly when InlineDataSize is 0, so ports
	// still compare equal by value.
	noInline bool
}

// Transports a port listens on.
const (
	TransportRDMA = "rdma"
	TransportTCP  = "tcp"
)

// Transports lists the transports a port or referral may name.
var Transports = []string{TransportRDMA, TransportTCP}

// Referral is a discovery referral: another port serving discovery.
type Referral struct {
	Transport string `yaml:"transport"` // rdma (default) or tcp
	Address   string `yaml:"address"`   // IPv4 or IPv6 literal
	Port      uint16 `yaml:"port"`      // trsvcid (default 4420)
}

// ANA states, as written in the configuration.
const (
	ANAOptimized      = "optimized"
	ANANonOptimized   = "non_optimized"
	ANAInaccessible   = "inaccessible"
	ANAPersistentLoss = "persistent_loss"
	ANAChange         = "change"
)

// ANAStates lists the ANA states a port may give a group.
var ANAStates = []string{ANAOptimized, ANANonOptimized, ANAInaccessible, ANAPersistentLoss, ANAChange}

// ANAState is the state of ANA group g on p: optimized unless set.
func (p Port) ANAState(g uint32) string {
	if s, ok := p.ANA[g]; ok {
		return s
	}
	return ANAOptimized
}

// SameListener reports whether p and o listen alike: equal but for their
// ANA states and referrals, which change without restarting the listener.
func (p Port) SameListener(o Port) bool {
	return p.ID == o.ID && p.Transport == o.Transport && p.Address == o.Address && p.Port == o.Port &&
		p.InlineDataSize == o.InlineDataSize && p.MaxQueueSize == o.MaxQueueSize && p.noInline == o.noInline &&
		p.TLS == o.TLS // a host that connected in clear must not stay on a port that now requires TLS
}

// Equal reports whether p and o are the same port in every setting.
func (p Port) Equal(o Port) bool {
	return p.SameListener(o) && maps.Equal(p.ANA, o.ANA) && slices.Equal(p.Referrals, o.Referrals)
}

// SetInlineDataSize sets the in-capsule data size as an explicit value:
// unlike a zero InlineDataSize field, SetInlineDataSize(0) survives
// ApplyDefaults and turns in-capsule data off.
func (p *Port) SetInlineDataSize(n uint32) {
	p.InlineDataSize, p.noInline = n, n == 0
}

// Subsystem is one NVM subsystem.
type Subsystem struct {
	NQN          string `yaml:"nqn"`
	Serial       string `yaml:"serial"`
	Model        string `yaml:"model"`
	AllowAnyHost bool   `yaml:"allow_any_host"`
	// Hosts are the hosts allowed in: NQNs, or objects with the NQN and
	// the host's DH-HMAC-CHAP secrets (Host).
	Hosts []Host   `yaml:"hosts"`
	Ports []uint16 `yaml:"ports"` // empty: every port
	// DHCHAPHashes and DHCHAPDHGroups restrict what in-band
	// authentication accepts, in order of preference (empty: all;
	// sha256 and null first).
	DHCHAPHashes   []string `yaml:"dhchap_hashes,omitempty"`
	DHCHAPDHGroups []string `yaml:"dhchap_dhgroups,omitempty"`
	// CntlidMin and CntlidMax bound the controller IDs handed out (0:
	// the defaults, 1 and 0xffef; see CntlidRange). Daemons that serve one subsystem together
	// need disjoint ranges: a host refuses a controller ID seen twice.
	CntlidMin uint16 `yaml:"cntlid_min,omitempty"`
	CntlidMax uint16 `yaml:"cntlid_max,omitempty"`
	// MaxControllers is the most controllers (one per host and path)
	// connected at once (default DefaultMaxControllers).
	MaxControllers int `yaml:"max_controllers"`
	// MaxIOQueues is the most I/O queues one controller gets (default
	// DefaultMaxIOQueues); a host asking for more gets this many.
	MaxIOQueues int         `yaml:"max_io_queues"`
	Namespaces  []Namespace `yaml:"namespaces"`
}

// Namespace is one namespace of a subsystem.
type Namespace struct {
	NSID      uint32 `yaml:"nsid"`
	Backend   string `yaml:"backend"` // file | block | nullblk
	Path      string `yaml:"path"`
	Size      Size   `yaml:"size"`       // bytes; accepts 512, 1GiB, 100MB ...
	BlockSize uint32 `yaml:"block_size"` // 512 | 4096 (default 512; block: the device's when 0)
	ReadOnly  bool   `yaml:"read_only"`
	Buffered  bool   `yaml:"buffered"`            // file: page cache instead of O_DIRECT
	UUID      string `yaml:"uuid"`                // "" derives one from nqn+nsid
	ANAGroup  uint32 `yaml:"ana_group,omitempty"` // ANA group ID (0: DefaultANAGroup; see Group)
	// Hosts limits the namespace to these of the subsystem's hosts; left
	// out, every host the subsystem allows sees it, and an empty list
	// hides it from all (visibility.go).
	Hosts *[]string `yaml:"hosts,omitempty"`
	// Reservations: the NVMe reservation commands (default on; off, they
	// answer Invalid Opcode).
	Reservations Switch `yaml:"reservations,omitempty"`
	// SharedReservations keeps the reservation on a block device two
	// daemons serve (shared_reservations.go).
	SharedReservations SharedReservations `yaml:"shared_reservations,omitempty"`

	QoS QoS `yaml:"qos,omitempty"` // rate limits (qos.go)

	// rbd: the image, and the cluster it lives in (each key of Ceph left
	// out takes the top-level ceph block's).
	Pool           string `yaml:"pool,omitempty"`
	RadosNamespace string `yaml:"rados_namespace,omitempty"`
	Image          string `yaml:"image,omitempty"`
	Create         bool   `yaml:"create,omitempty"` // create the image with size if it does not exist
	Ceph           Ceph   `yaml:"ceph,omitempty"`
}

// Ceph says how to reach a Ceph cluster: its configuration file, the
// cephx user and that user's keyring.
type Ceph struct {
	Conf    string `yaml:"conf,omitempty"`    // default /etc/ceph/ceph.conf
	User    string `yaml:"user,omitempty"`    // cephx user, without "client." (default admin)
	Keyring string `yaml:"keyring,omitempty"` // "" for the keyring ceph.conf names
}

// Source names what the namespace serves: its path, or for rbd
// "rbd:pool/[rados_namespace/]image".
func (ns Namespace) Source() string {
	if ns.Backend != "rbd" {
		return ns.Path
	}
	if ns.RadosNamespace != "" {
		return "rbd:" + ns.Pool + "/" + ns.RadosNamespace + "/" + ns.Image
	}
	return "rbd:" + ns.Pool + "/" + ns.Image
}

// inherit fills c's keys left out from top's.
func (c Ceph) inherit(top Ceph) Ceph {
	if c.Conf == "" {
		c.Conf = top.Conf
	}
	if c.User == "" {
		c.User = top.User
	}
	if c.Keyring == "" {
		c.Keyring = top.Keyring
	}
	return c
}

// CntlidRange is the controller IDs s hands out, with the defaults for
// bounds left unset.
func (s Subsystem) CntlidRange() (lo, hi uint16) {
	lo, hi = s.CntlidMin, s.CntlidMax
	if lo == 0 {
		lo = nvme.MinControllerID
	}
	if hi == 0 {
		hi = nvme.MaxControllerID
	}
	return lo, hi
}

// Group is the namespace's ANA group ID, with the default.
func (ns Namespace) Group() uint32 {
	if ns.ANAGroup == 0 {
		return DefaultANAGroup
	}
	return ns.ANAGroup
}

// Size is a byte count that unmarshals from an integer or a human size.
type Size int64

// Clone returns a deep copy of c.
func (c *Config) Clone() *Config {
	out := *c
	out.RXE = append([]string(nil), c.RXE...)
	out.RDMA.PollerCPUs = append([]int(nil), c.RDMA.PollerCPUs...)
	if c.RDMA.SharedReceiveQueue != nil {
		srq := *c.RDMA.SharedReceiveQueue
		out.RDMA.SharedReceiveQueue = &srq
	}
	if c.Gateway != nil {
		g := *c.Gateway
		g.Groups = slices.Clone(g.Groups)
		out.Gateway = &g
	}
	out.Ports = append([]Port(nil), c.Ports...)
	for i := range out.Ports {
		out.Ports[i].ANA = maps.Clone(out.Ports[i].ANA)
		out.Ports[i].Referrals = slices.Clone(out.Ports[i].Referrals)
	}
	out.Subsystems = make([]Subsystem, len(c.Subsystems))
	for i, s := range c.Subsystems {
		s.Hosts = append([]Host(nil), s.Hosts...)
		for j := range s.Hosts {
			s.Hosts[j] = s.Hosts[j].clone()
		}
		s.DHCHAPHashes = slices.Clone(s.DHCHAPHashes)
		s.DHCHAPDHGroups = slices.Clone(s.DHCHAPDHGroups)
		s.Ports = append([]uint16(nil), s.Ports...)
		s.Namespaces = append([]Namespace(nil), s.Namespaces...)
		for j := range s.Namespaces {
			s.Namespaces[j].Hosts = cloneHosts(s.Namespaces[j].Hosts)
		}
		out.Subsystems[i] = s
	}
	return &out
}

// Switch is a yes/no key that is on when left out.
type Switch uint8

// Switch values; the zero value is "left out".
const (
	SwitchDefault Switch = iota
	SwitchOn
	SwitchOff
)

// SwitchOf is the Switch set to on.
func SwitchOf(on bool) Switch {
	if on {
		return SwitchOn
	}
	return SwitchOff
}

// On reports whether the switch is on (left out counts as on).
func (s Switch) On() bool { return s != SwitchOff }

// UnmarshalYAML takes a YAML boolean.
func (s *Switch) UnmarshalYAML(n *yaml.Node) error {
	var on bool
	if err := n.Decode(&on); err != nil {
		return fmt.Errorf("line %d: %q is not true or false", n.Line, n.Value)
	}
	*s = SwitchOf(on)
	return nil
}

// MarshalYAML writes a boolean (the key is left out while default).
func (s Switch) MarshalYAML() (any, error) { return s.On(), nil }
