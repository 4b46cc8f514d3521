package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"
)

// Load reads, defaults and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse decodes YAML strictly (unknown keys are errors), applies defaults
// and validates.
func Parse(data []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("configuration is empty")
		}
		return nil, fmt.Errorf("parse: %w", err)
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Defaults for optional keys.
const (
	DefaultServiceID      = 4420
	DefaultInlineDataSize = 8192
	DefaultMaxQueueSize   = 128
	DefaultBlockSize      = 512
	DefaultANAGroup       = 1
	DefaultControlSocket  = "/run/nvmeof-tgt/ctl.sock"
	DefaultStateFile      = "/var/lib/nvmeof-tgt/state.json"
	DefaultCephConf       = "/etc/ceph/ceph.conf"
	DefaultCephUser       = "admin"

	// Every queue pair costs a polling thread, up to 8 more threads for
	// blocking backend calls, two file descriptors and about 21 MiB of
	// registered memory at the default queue size. 1024 queue pairs keep
	// the threads (9216 at most) under the Go runtime's limit of 10000,
	// and 64 hosts at 8 I/O queues each (576 queue pairs, about 12 GiB
	// pinned) leave room for a second path to most of them.
	DefaultMaxQueuePairs = 1024
	// Enough for the I/O queues of two controllers of one host being
	// set up at once at max_io_queues 32.
	DefaultUnconnectedPerAddress = 64
	// Two paths for each of 64 hosts.
	DefaultMaxControllers = 128
	// 8 queues of 128 commands: 1024 commands in flight per host and
	// path, more than one RDMA link needs to stay busy. The Linux host
	// asks for one per CPU.
	DefaultMaxIOQueues = 8
	// DefaultBufferPool is each RDMA device's shared data buffers: 128
	// transfers of 1 MiB, or 32768 of 4 KiB, in flight at once.
	DefaultBufferPool = 128 << 20
	// DefaultReceiveQueueDepth is the commands in flight a device's shared
	// receive queue holds, over all its queue pairs.
	DefaultReceiveQueueDepth = 4096
)

// defaultAddress fills in a port's or referral's transport and service ID
// where the file leaves them out.
func defaultAddress(transport *string, port *uint16) {
	if *transport == "" {
		*transport = "rdma"
	}
	if *port == 0 {
		*port = DefaultServiceID
	}
}

// ApplyDefaults fills in every optional key left out.
func (c *Config) ApplyDefaults() {
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Control.Socket == "" {
		c.Control.Socket = DefaultControlSocket
	}
	if c.StateFile == "" {
		c.StateFile = DefaultStateFile
	}
	if c.IOEngine == "" {
		c.IOEngine = "auto"
	}
	if c.Limits.MaxQueuePairs == 0 {
		c.Limits.MaxQueuePairs = DefaultMaxQueuePairs
	}
	if c.Limits.UnconnectedPerAddress == 0 {
		c.Limits.UnconnectedPerAddress = min(DefaultUnconnectedPerAddress, max(c.Limits.MaxQueuePairs/2, 1))
	}
	if c.RDMA.BufferPool == 0 {
		c.RDMA.BufferPool = DefaultBufferPool
	}
	c.TCP.applyDefaults()
	if c.RDMA.ReceiveQueueDepth == 0 {
		c.RDMA.ReceiveQueueDepth = DefaultReceiveQueueDepth
	}
	if c.RDMA.SharedReceiveQueue == nil {
		srq := true
		c.RDMA.SharedReceiveQueue = &srq
	}
	if c.Gateway != nil {
		c.Gateway.applyDefaults(c.Ceph)
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		defaultAddress(&p.Transport, &p.Port)
		if p.InlineDataSize == 0 && !p.noInline {
			p.InlineDataSize = DefaultInlineDataSize
		}
		p.noInline = p.InlineDataSize == 0
		if p.MaxQueueSize == 0 {
			p.MaxQueueSize = DefaultMaxQueueSize
		}
		for j := range p.Referrals {
			defaultAddress(&p.Referrals[j].Transport, &p.Referrals[j].Port)
		}
	}
	for i := range c.Subsystems {
		s := &c.Subsystems[i]
		if s.MaxControllers == 0 {
			s.MaxControllers = DefaultMaxControllers
		}
		if s.MaxIOQueues == 0 {
			s.MaxIOQueues = DefaultMaxIOQueues
		}
		for j := range c.Subsystems[i].Namespaces {
			ns := &c.Subsystems[i].Namespaces[j]
			if ns.BlockSize == 0 && ns.Backend != "block" {
				ns.BlockSize = DefaultBlockSize
			}
			if ns.Backend == "rbd" {
				ns.Ceph = ns.Ceph.inherit(c.Ceph).inherit(Ceph{Conf: DefaultCephConf, User: DefaultCephUser})
			}
		}
	}
}

// Marshal writes c as YAML that Parse accepts.
func Marshal(c *Config) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
