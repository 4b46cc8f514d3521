package fabrics

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// ParkAfter is the sleep after which a poller parks (Spin.Parks): the Go
// runtime takes a processor back from a goroutine in a system call once
// the call has lasted about this long.
const ParkAfter = 10 * time.Millisecond

// Parker lets an idle poller sleep in the Go runtime's network poller
// instead of in poll(2).
//
// A poller sleeping in poll(2) keeps its processor in the system call
// state. When the call returns after a long sleep (an idle queue woken by
// a keep-alive), the runtime's monitor thread wakes with it, polls every
// 20 µs until it can take the processor back 10 ms after the next sleep
// began, and on the way preempts the poller with a signal, its scheduling
// tick having stood still through the sleep: dozens of thread wake-ups
// for one keep-alive. A goroutine parked in the network poller gives its
// processor up at once and the monitor sleeps on; waking it costs a
// thread's wake-up in the network poller. That would cost a streaming
// host's next command more than it saves, so pollers park only after a
// long sleep and otherwise sleep in poll(2).
//
// The parker is an epoll instance watching the poller's descriptors for
// reading, registered with the runtime's poller as one descriptor.
type Parker struct {
	// KeepThread keeps the caller locked to its thread while parked, for
	// a poller pinned to a CPU: the thread's CPU mask must not pass to
	// whatever the runtime runs on it next.
	KeepThread bool

	file  *os.File
	rc    syscall.RawConn
	epfd  int
	ready func(fd uintptr) bool // allocated once: Park allocates nothing
	evs   [2]unix.EpollEvent
}

// NewParker watches fds: Park returns once one of them is readable.
func NewParker(fds ...int) (*Parker, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	for _, fd := range fds {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.Close(epfd)
			return nil, fmt.Errorf("epoll_ctl of descriptor %d: %w", fd, err)
		}
	}
	// Non-blocking, so that os.NewFile registers it with the runtime.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("epoll descriptor non-blocking: %w", err)
	}
	p := &Parker{file: os.NewFile(uintptr(epfd), "poller"), epfd: epfd}
	if p.rc, err = p.file.SyscallConn(); err != nil {
		p.file.Close()
		return nil, err
	}
	// A raw call: it does not block, and through the runtime's system call
	// bookkeeping it would wake the monitor thread parking lets sleep.
	p.ready = func(uintptr) bool {
		n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.epfd), uintptr(unsafe.Pointer(&p.evs[0])),
			uintptr(len(p.evs)), 0, 0, 0)
		return e == 0 && n > 0 || e != 0 && e != unix.EINTR
	}
	return p, nil
}

// Park blocks until one of the descriptors is readable, or Close. Its
// caller is a poller locked to its thread (runtime.LockOSThread), and is
// unlocked while it is parked unless KeepThread: whichever thread finds it
// ready runs it and it locks to that one, where a locked goroutine would
// be handed over to its own thread, another wake-up or two per
// keep-alive.
func (p *Parker) Park() error {
	if p.KeepThread {
		return p.rc.Read(p.ready)
	}
	runtime.UnlockOSThread()
	err := p.rc.Read(p.ready)
	runtime.LockOSThread()
	return err
}

// Close ends a Park in progress and frees the epoll instance. The watched
// descriptors stay open.
func (p *Parker) Close() error { return p.file.Close() }

// IdleParker is a poller's Parker, made at its first idle sleep: most
// queues of a busy host never park.
type IdleParker struct {
	parker *Parker
	failed bool   // the Parker could not be made: the poller sleeps in poll(2)
	Parks  uint64 // sleeps spent parked
}

// Park sleeps until one of fds is readable, in a Parker made at the first
// call, with KeepThread set to keepThread. It reports false, having not
// slept, when the Parker cannot be made; that is logged once, and the
// poller sleeps in poll(2) from then on.
func (ip *IdleParker) Park(log logrus.FieldLogger, keepThread bool, fds ...int) bool {
	if ip.parker == nil {
		if ip.failed {
			return false
		}
		p, err := NewParker(fds...)
		if err != nil {
			ip.failed = true
			log.WithError(err).Warn("the idle poller cannot park; it sleeps in poll(2)")
			return false
		}
		p.KeepThread = keepThread
		ip.parker = p
	}
	ip.Parks++
	if err := ip.parker.Park(); err != nil {
		log.WithError(err).Warn("parking the idle poller failed")
	}
	return true
}

// Close frees the Parker, if one was made.
func (ip *IdleParker) Close() {
	if ip.parker != nil {
		ip.parker.Close()
		ip.parker = nil
	}
}
