package daemon

import (
	"fmt"
	"runtime/debug"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"golang.org/x/sys/unix"
)

// checkMemlock refuses to start where an RDMA device's registrations, need
// bytes when a port first listens on it, would not fit the locked-memory
// limit, with an error that says how to fix it.
func checkMemlock(need int64) error {
	minMemlock := uint64(need)
	if hasIPCLock() {
		return nil // registrations are not charged against the limit
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
		return nil
	}
	if lim.Cur == unix.RLIM_INFINITY || lim.Cur >= minMemlock {
		return nil
	}
	// Raise the soft limit as far as the hard limit allows.
	if lim.Max == unix.RLIM_INFINITY || lim.Max >= minMemlock {
		lim.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lim); err == nil {
			return nil
		}
	}
	return fmt.Errorf("locked-memory limit is %d KiB, below the %d MiB each RDMA device registers (rdma.buffer_pool and the shared receive queues): run with LimitMEMLOCK=infinity (systemd) or `ulimit -l unlimited`, or lower rdma.buffer_pool", lim.Cur>>10, minMemlock>>20)
}

// hasIPCLock reports whether the process holds CAP_IPC_LOCK, as root does.
func hasIPCLock() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[0].Effective&(1<<unix.CAP_IPC_LOCK) != 0
}

// raiseThreadLimit lets the Go runtime start the threads maxQueuePairs
// queue pairs may take at once (fabrics.ThreadsPerQueuePair each), with
// room for the daemon's own, instead of aborting at its default 10000. It
// never lowers the limit: threads already started stay.
func raiseThreadLimit(maxQueuePairs int) {
	want := max(10000, maxQueuePairs*fabrics.ThreadsPerQueuePair+1000)
	if prev := debug.SetMaxThreads(want); prev > want {
		debug.SetMaxThreads(prev)
	}
}
