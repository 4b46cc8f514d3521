package config

import "slices"

// Config is the whole configuration file.
type Config struct {
	Log       Log      `yaml:"log"`
	Metrics   Metrics  `yaml:"metrics"`
	Control   Control  `yaml:"control"`
	RXE       []string `yaml:"rxe,omitempty"` // netdevs to give a soft-RoCE link at start
	StateFile string   `yaml:"state_file"`    // the daemon's lifetime counters (SMART), across restarts
	Limits    Limits   `yaml:"limits"`
	RDMA      RDMA     `yaml:"rdma"`
	// IOEngine runs file and block I/O: io_uring, threads (worker
	// goroutines), or auto (default: io_uring where the kernel allows it).
	// A change takes effect at restart.
	IOEngine   string      `yaml:"io_engine"`
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
	Transport string `yaml:"transport"` // rdma
	Address   string `yaml:"address"`   // IPv4 or IPv6 literal
	Port      uint16 `yaml:"port"`      // trsvcid (default 4420)
	// InlineDataSize is the in-capsule data each I/O command may carry
	// (default DefaultInlineDataSize when the key is left out; 0 written
	// out turns in-capsule data off).
	InlineDataSize uint32 `yaml:"inline_data_size"`
	MaxQueueSize   uint16 `yaml:"max_queue_size"`

	// noInline records an explicit inline_data_size: 0, which
	// ApplyDefaults keeps, where a key left out gets the default. After
	// ApplyDefaults it is true exactly when InlineDataSize is 0, so ports
	// still compare equal by value.
	noInline bool
}

// SetInlineDataSize sets the in-capsule data size as an explicit value:
// unlike a zero InlineDataSize field, SetInlineDataSize(0) survives
// ApplyDefaults and turns in-capsule data off.
func (p *Port) SetInlineDataSize(n uint32) {
	p.InlineDataSize, p.noInline = n, n == 0
}

// Subsystem is one NVM subsystem.
type Subsystem struct {
	NQN          string   `yaml:"nqn"`
	Serial       string   `yaml:"serial"`
	Model        string   `yaml:"model"`
	AllowAnyHost bool     `yaml:"allow_any_host"`
	Hosts        []string `yaml:"hosts"`
	Ports        []uint16 `yaml:"ports"` // empty: every port
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
	Buffered  bool   `yaml:"buffered"` // file: page cache instead of O_DIRECT
	UUID      string `yaml:"uuid"`     // "" derives one from nqn+nsid
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
	out.Ports = append([]Port(nil), c.Ports...)
	out.Subsystems = make([]Subsystem, len(c.Subsystems))
	for i, s := range c.Subsystems {
		s.Hosts = append([]string(nil), s.Hosts...)
		s.Ports = append([]uint16(nil), s.Ports...)
		s.Namespaces = append([]Namespace(nil), s.Namespaces...)
		out.Subsystems[i] = s
	}
	return &out
}
