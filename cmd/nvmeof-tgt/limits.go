package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// minMemlock is the locked memory one queue pair's registered buffers
// need at the default queue size, with headroom for a few connections.
const minMemlock = 64 << 20

// checkMemlock refuses to start where RDMA registrations would fail one
// connection at a time, with an error that says how to fix it.
func checkMemlock() error {
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
	return fmt.Errorf("locked-memory limit is %d KiB, below the %d MiB RDMA buffers need: run with LimitMEMLOCK=infinity (systemd) or `ulimit -l unlimited`", lim.Cur>>10, minMemlock>>20)
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
