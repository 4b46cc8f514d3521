package rdma

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"golang.org/x/sys/unix"
)

// Settings are the transport's daemon-wide resources: they take effect
// for devices set up after Configure, which the daemon calls once before
// it listens.
type Settings struct {
	// BufferPool is the bytes of data buffers each device registers and
	// its queue pairs share; a multiple of 1 MiB, at least 1 MiB.
	BufferPool int64
	// SharedReceiveQueue: queue pairs receive from one shared receive
	// queue per device and in-capsule size where the device has them.
	SharedReceiveQueue bool
	// ReceiveQueueDepth is the entries of each I/O shared receive queue,
	// capped by the device.
	ReceiveQueueDepth int
	// PollerCPUs pins queue pair pollers to these CPUs, one each in turn;
	// empty leaves them to the scheduler.
	PollerCPUs []int
}

// Defaults.
const (
	DefaultBufferPool        = 128 << 20
	DefaultReceiveQueueDepth = 4096
	// controlPool is each device's memory for response capsules: 16 bytes
	// per request, 4 KiB for a queue of 128.
	controlPool = 8 << 20
	// adminRingDepth is the entries of the shared receive queue admin
	// queues use: they carry few commands, and an Asynchronous Event
	// Request does not hold its receive buffer while it waits.
	adminRingDepth = 256
)

var (
	settingsMu sync.Mutex
	settings   = Settings{BufferPool: DefaultBufferPool, SharedReceiveQueue: true, ReceiveQueueDepth: DefaultReceiveQueueDepth}
	nextCPU    atomic.Uint32
)

// Configure sets the transport's resources.
func Configure(s Settings) error {
	if s.BufferPool < maxBlock || s.BufferPool%maxBlock != 0 {
		return fmt.Errorf("buffer pool of %d bytes: want a multiple of 1 MiB", s.BufferPool)
	}
	if s.ReceiveQueueDepth < 64 {
		return fmt.Errorf("receive queue depth %d: want at least 64", s.ReceiveQueueDepth)
	}
	settingsMu.Lock()
	defer settingsMu.Unlock()
	settings = s
	settings.PollerCPUs = append([]int(nil), s.PollerCPUs...)
	return nil
}

func currentSettings() Settings {
	settingsMu.Lock()
	defer settingsMu.Unlock()
	return settings
}

// pinPoller binds the calling thread, which the poller has locked, to the
// next CPU of cpus. The poller never unlocks the thread afterwards, so the
// thread ends with it instead of carrying the affinity to other goroutines.
func pinPoller(cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	cpu := cpus[int(nextCPU.Add(1)-1)%len(cpus)]
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin poller to CPU %d: %w", cpu, err)
	}
	return nil
}

// DeviceMemory is the memory one device registers when a port first
// listens on it: the buffer pool, the response memory, and a shared
// receive queue per in-capsule size of inline plus the admin queues'.
func DeviceMemory(s Settings, inline []int) int64 {
	n := s.BufferPool + controlPool + ringBytes(adminRingDepth, nvme.ConnectDataSize)
	if !s.SharedReceiveQueue {
		return n + ringBytes(adminRingDepth, 0) // a few queue pairs' own rings
	}
	seen := map[int]bool{}
	for _, in := range inline {
		if !seen[in] {
			seen[in] = true
			n += ringBytes(s.ReceiveQueueDepth, in)
		}
	}
	return n
}

func ringBytes(n, inline int) int64 {
	return int64(align(n*align(inline, pageSize)+n*64, pageSize))
}
