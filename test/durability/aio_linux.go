package durability

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Linux native AIO, the few calls the writer needs. The writer submits
// its writes asynchronously because that is the path on which an O_DSYNC
// write to a block device is made durable by FUA alone: a synchronous
// pwrite with O_DSYNC is a FUA write followed by a cache flush
// (generic_write_sync → blkdev_fsync), and the flush would hide a target
// that ignores FUA. An asynchronous one completes with the FUA write
// (block/fops.c: dio_bio_write_op sets REQ_FUA, and no flush follows).

// iocb is struct iocb of <linux/aio_abi.h> on a little-endian machine.
type iocb struct {
	data      uint64
	key       uint32
	rwFlags   int32
	opcode    uint16
	reqprio   int16
	fd        uint32
	buf       uint64
	nbytes    uint64
	offset    int64
	reserved2 uint64
	flags     uint32
	resfd     uint32
}

// ioEvent is struct io_event.
type ioEvent struct {
	data uint64
	obj  uint64
	res  int64
	res2 int64
}

const iocbCmdPwrite = 1

func init() {
	if unsafe.Sizeof(iocb{}) != 64 || unsafe.Sizeof(ioEvent{}) != 32 {
		panic("durability: iocb or io_event layout differs from <linux/aio_abi.h>")
	}
}

// aio is one AIO context of a fixed depth.
type aio struct {
	ctx    uintptr
	iocbs  []iocb
	ptrs   []*iocb
	events []ioEvent
}

func newAIO(depth int) (*aio, error) {
	a := &aio{iocbs: make([]iocb, depth), ptrs: make([]*iocb, depth), events: make([]ioEvent, depth)}
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, uintptr(depth), uintptr(unsafe.Pointer(&a.ctx)), 0); e != 0 {
		return nil, fmt.Errorf("io_setup(%d): %w", depth, e)
	}
	return a, nil
}

func (a *aio) close() {
	unix.Syscall(unix.SYS_IO_DESTROY, a.ctx, 0, 0)
}

// pwrite writes bufs[i] at offs[i] of fd, all at once, with the
// RWF_* flags rwFlags, and returns when every write has completed.
func (a *aio) pwrite(fd int, bufs [][]byte, offs []int64, rwFlags int) error {
	n := len(bufs)
	if n > len(a.iocbs) {
		return fmt.Errorf("aio: %d writes for a context of depth %d", n, len(a.iocbs))
	}
	for i := range n {
		a.iocbs[i] = iocb{data: uint64(i), rwFlags: int32(rwFlags), opcode: iocbCmdPwrite, fd: uint32(fd),
			buf: uint64(uintptr(unsafe.Pointer(&bufs[i][0]))), nbytes: uint64(len(bufs[i])), offset: offs[i]}
		a.ptrs[i] = &a.iocbs[i]
	}
	for done := 0; done < n; {
		r, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, a.ctx, uintptr(n-done), uintptr(unsafe.Pointer(&a.ptrs[done])))
		if e == unix.EINTR || e == unix.EAGAIN {
			continue
		}
		if e != 0 {
			return fmt.Errorf("io_submit: %w", e)
		}
		done += int(r)
	}
	var firstErr error
	for got := 0; got < n; {
		r, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, a.ctx, 1, uintptr(n-got), uintptr(unsafe.Pointer(&a.events[0])), 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return fmt.Errorf("io_getevents: %w", e)
		}
		for _, ev := range a.events[:r] {
			i := ev.data
			switch {
			case ev.res < 0 && firstErr == nil:
				firstErr = fmt.Errorf("write of %d bytes at byte %d: %w", len(bufs[i]), offs[i], unix.Errno(-ev.res))
			case ev.res >= 0 && ev.res != int64(len(bufs[i])) && firstErr == nil:
				firstErr = fmt.Errorf("write of %d bytes at byte %d: short write of %d", len(bufs[i]), offs[i], ev.res)
			}
		}
		got += int(r)
	}
	runtime.KeepAlive(bufs)
	return firstErr
}
