package tcp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The poller's calls on its non-blocking socket and eventfd never block,
// so they skip the runtime's system call bookkeeping (RawSyscall). Through
// it, the first call of a poller woken out of a long sleep would wake the
// runtime's monitor thread for nothing, a few thread wake-ups for each
// keep-alive of an idle host (fabrics.Parker says why the monitor sleeps
// then). Only the poller's sleep, poll(2) with a timeout, blocks, and
// goes through the bookkeeping.

func rawRead(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rawWritev(fd int, iov []unix.Iovec) (int, unix.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	return int(n), e
}

// zeroTimeout is ppoll's: a variable of the package, so that no call
// allocates one.
var zeroTimeout unix.Timespec

// rawPollNow is poll(2) with a timeout of 0: what is ready now.
func rawPollNow(fds []unix.PollFd) error {
	_, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)),
		uintptr(unsafe.Pointer(&zeroTimeout)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
