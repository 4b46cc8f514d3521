package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnsupported wraps the reason io_uring cannot be used here: a kernel
// without it (ENOSYS), one where it is switched off
// (kernel.io_uring_disabled, EPERM), or one lacking a feature we rely on.
var ErrUnsupported = errors.New("io_uring unsupported")

// Ring is one io_uring instance: a submission queue the caller fills with
// Prep*, Submit to hand the entries to the kernel, and completions read
// with Peek and Advance. Not safe for concurrent use.
type Ring struct {
	fd  int
	mem []byte // both rings (IORING_FEAT_SINGLE_MMAP)
	sqm []byte // the submission entries

	sqHead, sqTail *atomic.Uint32
	sqMask         uint32
	sqEntries      uint32
	sqes           []sqe
	sqeTail        uint32 // next entry to fill; published to sqTail by Submit

	cqHead, cqTail *atomic.Uint32
	cqMask         uint32
	cqes           []cqe
}

// New sets up a ring with room for at least entries submissions (a power
// of two, at most 32768) and twice as many completions.
func New(entries uint32) (*Ring, error) {
	var p params
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		if e == unix.ENOSYS || e == unix.EPERM {
			return nil, fmt.Errorf("%w: io_uring_setup: %w", ErrUnsupported, e)
		}
		return nil, fmt.Errorf("io_uring_setup: %w", e)
	}
	r := &Ring{fd: int(fd)}
	if p.features&featsNeeded != featsNeeded {
		r.Close()
		return nil, fmt.Errorf("%w: kernel lacks features %#x", ErrUnsupported, featsNeeded&^p.features)
	}
	if err := r.mmap(&p); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// mmap maps the rings and the entry array, and points the submission
// array at entries in order once: Submit then only moves the tail.
func (r *Ring) mmap(p *params) error {
	sqSize := p.sqOff.array + p.sqEntries*4
	cqSize := p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(cqe{}))
	var err error
	if r.mem, err = unix.Mmap(r.fd, offSQRing, int(max(sqSize, cqSize)),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("mmap io_uring rings: %w", err)
	}
	sqeBytes := int(p.sqEntries) * int(unsafe.Sizeof(sqe{}))
	if r.sqm, err = unix.Mmap(r.fd, offSQEs, sqeBytes,
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("mmap io_uring entries: %w", err)
	}
	r.sqHead, r.sqTail = r.u32(p.sqOff.head), r.u32(p.sqOff.tail)
	r.sqMask, r.sqEntries = r.u32(p.sqOff.ringMask).Load(), p.sqEntries
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqm[0])), p.sqEntries)
	array := unsafe.Slice((*uint32)(unsafe.Pointer(&r.mem[p.sqOff.array])), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.sqeTail = r.sqTail.Load()
	r.cqHead, r.cqTail = r.u32(p.cqOff.head), r.u32(p.cqOff.tail)
	r.cqMask = r.u32(p.cqOff.ringMask).Load()
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&r.mem[p.cqOff.cqes])), p.cqEntries)
	return nil
}

func (r *Ring) u32(off uint32) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&r.mem[off]))
}

// Probe reports whether io_uring works here, with the reason if not.
func Probe() error {
	r, err := New(2)
	if err != nil {
		return err
	}
	return r.Close()
}

// Entries is the submission queue's size.
func (r *Ring) Entries() uint32 { return r.sqEntries }

// Close unmaps and closes the ring. Operations still in the kernel
// complete there, but their completions are lost: drain first.
func (r *Ring) Close() error {
	if r.sqm != nil {
		unix.Munmap(r.sqm)
		r.sqm, r.sqes = nil, nil
	}
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem, r.cqes = nil, nil
	}
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// RegisterEventFD makes every completion write (add 1 to) the eventfd
// efd, so that a thread asleep in poll(2) wakes for it.
func (r *Ring) RegisterEventFD(efd int) error {
	fd := int32(efd)
	_, _, e := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerEventFD,
		uintptr(unsafe.Pointer(&fd)), 1, 0, 0)
	if e != 0 {
		return fmt.Errorf("io_uring_register eventfd: %w", e)
	}
	return nil
}

// next claims the next submission entry, or nil when the queue is full.
func (r *Ring) next() *sqe {
	if r.sqeTail-r.sqHead.Load() >= r.sqEntries {
		return nil
	}
	e := &r.sqes[r.sqeTail&r.sqMask]
	r.sqeTail++
	*e = sqe{}
	return e
}

func bufAddr(p []byte) uint64 {
	if len(p) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&p[0])))
}

// PrepRead queues a read of len(p) bytes at off from fd. It reports false
// when the submission queue is full.
func (r *Ring) PrepRead(fd int, p []byte, off int64, tag uint64) bool {
	return r.prepRW(opRead, fd, p, off, 0, tag)
}

// PrepWrite queues a write of p at off to fd with rwFlags (RWF_DSYNC for
// a write that must be on stable media when it completes). It reports
// false when the submission queue is full.
func (r *Ring) PrepWrite(fd int, p []byte, off int64, rwFlags uint32, tag uint64) bool {
	return r.prepRW(opWrite, fd, p, off, rwFlags, tag)
}

func (r *Ring) prepRW(op uint8, fd int, p []byte, off int64, rwFlags uint32, tag uint64) bool {
	e := r.next()
	if e == nil {
		return false
	}
	e.opcode, e.fd, e.off, e.addr, e.len = op, int32(fd), uint64(off), bufAddr(p), uint32(len(p))
	e.opFlags, e.userData = rwFlags, tag
	return true
}

// PrepFdatasync queues an fdatasync(2) of fd. It reports false when the
// submission queue is full.
func (r *Ring) PrepFdatasync(fd int, tag uint64) bool {
	e := r.next()
	if e == nil {
		return false
	}
	e.opcode, e.fd, e.opFlags, e.userData = opFsync, int32(fd), fsyncDatasync, tag
	return true
}

// Unsubmitted is how many queued entries Submit has yet to hand over.
func (r *Ring) Unsubmitted() uint32 { return r.sqeTail - r.sqHead.Load() }

// Unqueue takes back the queued entries the kernel has not taken (after a
// Submit failed), calling f with the tag of each, oldest first. They will
// never run. Without SQPOLL the kernel reads the submission queue only in
// Submit, so it cannot take them meanwhile.
func (r *Ring) Unqueue(f func(tag uint64)) {
	head := r.sqHead.Load()
	for i := head; i != r.sqeTail; i++ {
		f(r.sqes[i&r.sqMask].userData)
	}
	r.sqeTail = head
	r.sqTail.Store(head)
}

// Submit hands every queued entry to the kernel in one system call. An
// entry the kernel could not take yet (EAGAIN, EBUSY) stays queued for the
// next Submit.
func (r *Ring) Submit() error { return r.enter(0) }

// SubmitAndWait is Submit that also waits until at least one completion
// is ready.
func (r *Ring) SubmitAndWait() error { return r.enter(1) }

func (r *Ring) enter(wait uint32) error {
	r.sqTail.Store(r.sqeTail)
	for {
		n := r.Unsubmitted()
		if n == 0 && wait == 0 {
			return nil
		}
		flags := uintptr(0)
		if wait != 0 {
			flags = enterGetEvents
		}
		_, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n), uintptr(wait), flags, 0, 0)
		switch e {
		case 0, unix.EAGAIN, unix.EBUSY:
			return nil
		case unix.EINTR:
			continue
		}
		return fmt.Errorf("io_uring_enter: %w", e)
	}
}

// Ready reports whether a completion waits to be peeked. It is cheap (one
// atomic load), for a poller deciding whether to sleep.
func (r *Ring) Ready() bool { return r.cqHead.Load() != r.cqTail.Load() }

// Peek returns the oldest completion's tag and result (bytes transferred,
// or a negated errno), without consuming it; ok is false when there is
// none.
func (r *Ring) Peek() (tag uint64, res int32, ok bool) {
	h := r.cqHead.Load()
	if h == r.cqTail.Load() {
		return 0, 0, false
	}
	c := &r.cqes[h&r.cqMask]
	return c.userData, c.res, true
}

// Advance consumes the completion Peek returned, freeing its slot.
func (r *Ring) Advance() { r.cqHead.Store(r.cqHead.Load() + 1) }

// Errno turns a negative completion result into its error.
func Errno(res int32) error { return syscall.Errno(-res) }
