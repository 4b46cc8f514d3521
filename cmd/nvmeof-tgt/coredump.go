package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// noCoreDumps keeps the daemon's memory, which holds DH-HMAC-CHAP secrets,
// out of core dumps and away from ptrace and /proc/PID/mem of other
// processes of its user: the process is made non-dumpable and its core
// size limit 0 (the unit file sets LimitCORE=0 as well).
func noCoreDumps() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return fmt.Errorf("setrlimit(RLIMIT_CORE, 0): %w", err)
	}
	return nil
}
