package config

// TCP sizes the NVMe/TCP transport's shared resources. The buffer pool
// is set up when the daemon starts, and a reload that changes it takes
// effect at restart; the data timeout changes live.
type TCP struct {
	// BufferPool is the data buffer memory every TCP port shares
	// (default DefaultTCPBufferPool): what bounds the data in flight over
	// TCP, not the number of connections.
	BufferPool Size `yaml:"buffer_pool"`
	// DataTimeoutSeconds is how long a connection may go without sending
	// the data the target asked for with an R2T, or without reading its
	// responses, before it is closed to give its buffers back (0: the
	// transport's default, 5 s).
	DataTimeoutSeconds int `yaml:"data_timeout_seconds,omitempty"`
}

// MaxTCPDataTimeout bounds tcp.data_timeout_seconds below the 10 s a
// change of access (a reservation Preempt, hiding a namespace, an ANA
// change) waits for the writes in flight of the hosts losing it: a write
// whose R2T data never comes ends only with its connection, at the data
// timeout, and a longer one would have every such change refused.
const MaxTCPDataTimeout = 8

// DefaultTCPBufferPool is the TCP ports' shared data buffers: 64
// transfers of 1 MiB, or 16384 of 4 KiB, in flight at once.
const DefaultTCPBufferPool = 64 << 20

func (t *TCP) applyDefaults() {
	if t.BufferPool == 0 {
		t.BufferPool = DefaultTCPBufferPool
	}
}

func (v *validator) tcp(t TCP) {
	const mib = 1 << 20
	if t.BufferPool < mib || t.BufferPool > maxBufferPool || t.BufferPool%mib != 0 {
		v.add("tcp.buffer_pool", "%d bytes: want a whole number of MiB from 1MiB to 64GiB", int64(t.BufferPool))
	}
	if t.DataTimeoutSeconds < 0 || t.DataTimeoutSeconds > MaxTCPDataTimeout {
		v.add("tcp.data_timeout_seconds", "%d: want 1 to %d seconds, or 0 for the default of 5", t.DataTimeoutSeconds, MaxTCPDataTimeout)
	}
}
