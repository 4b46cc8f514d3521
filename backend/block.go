package backend

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() { Register("block", openBlock) }

// blockBackend serves a namespace from a block device with O_DIRECT.
type blockBackend struct {
	fileBackend
	writeBack bool  // the device has a volatile write cache
	reserve   int64 // bytes at the device's end kept out of Size (Options.Reserve)
}

func openBlock(opts Options) (Backend, error) {
	if opts.Path == "" {
		return nil, errors.New("block backend: path is required")
	}
	st, err := os.Stat(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Path, err)
	}
	if st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
		return nil, fmt.Errorf("%s: not a block device (use backend: file for regular files)", opts.Path)
	}
	flags := os.O_RDWR
	if opts.ReadOnly {
		flags = os.O_RDONLY
	}
	// O_EXCL on a block device fails while it is mounted or exported
	// elsewhere, which would otherwise corrupt it silently.
	f, err := os.OpenFile(opts.Path, flags|unix.O_DIRECT|unix.O_EXCL, 0)
	if errors.Is(err, unix.EBUSY) {
		return nil, fmt.Errorf("open %s: in use (mounted, or opened exclusively by another program): %w", opts.Path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", opts.Path, err)
	}
	fd := int(f.Fd())
	lbs, err := unix.IoctlGetInt(fd, unix.BLKSSZGET)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: BLKSSZGET: %w", opts.Path, err)
	}
	if opts.BlockSize != 0 && opts.BlockSize != uint32(lbs) {
		f.Close()
		return nil, fmt.Errorf("%s: block_size %d differs from the device's logical block size %d", opts.Path, opts.BlockSize, lbs)
	}
	b := &blockBackend{fileBackend: fileBackend{f: f, fd: fd, blockSize: uint32(lbs), readOnly: opts.ReadOnly, path: opts.Path}}
	b.writeBack = deviceWriteBack(fd)
	b.reserve = opts.Reserve
	if _, err := b.Resize(0); err != nil {
		f.Close()
		return nil, err
	}
	return b, nil
}

// Resize measures the device (again), less the reserved end; the size
// asked for is ignored.
func (b *blockBackend) Resize(int64) (int64, error) {
	var size uint64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(b.fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size))); e != 0 {
		return b.size.Load(), fmt.Errorf("%s: BLKGETSIZE64: %w", b.path, e)
	}
	n := int64(size) - int64(size)%int64(b.blockSize) - b.reserve
	if n <= 0 {
		return b.size.Load(), fmt.Errorf("%s: %d bytes, no more than the %d reserved at its end (shared_reservations)", b.path, size, b.reserve)
	}
	b.size.Store(n)
	return n, nil
}

// Traits: the device's own write cache decides whether a completed write
// can still be lost (queue/write_cache in sysfs: "write back" or "write
// through"); unknown counts as write back. BLKDISCARD promises nothing
// about what a discarded range reads back.
func (b *blockBackend) Traits() Traits {
	return Traits{VolatileCache: b.writeBack, DiscardZeroes: false}
}

// deviceWriteBack reads whether the block device behind fd has a volatile
// write cache.
func deviceWriteBack(fd int) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return true
	}
	v, ok := queueAttr(st.Rdev, "write_cache")
	return !ok || v != "write through"
}

// queueAttr reads a block device's queue attribute from sysfs. A partition
// has no queue directory of its own; its parent disk's applies.
func queueAttr(dev uint64, name string) (string, bool) {
	dir := fmt.Sprintf("/sys/dev/block/%d:%d/", unix.Major(dev), unix.Minor(dev))
	for _, p := range []string{dir + "queue/" + name, dir + "../queue/" + name} {
		if v, err := os.ReadFile(p); err == nil {
			return strings.TrimSpace(string(v)), true
		}
	}
	return "", false
}

func (b *blockBackend) Discard(off, length int64) error {
	return b.rangeIoctl("discard", unix.BLKDISCARD, "BLKDISCARD", off, length)
}

func (b *blockBackend) WriteZeroes(off, length int64) error {
	return b.rangeIoctl("write zeroes", unix.BLKZEROOUT, "BLKZEROOUT", off, length)
}

// rangeIoctl does op, which changes the data, with a block device ioctl
// that takes a byte range (BLKDISCARD, BLKZEROOUT) named req.
func (b *blockBackend) rangeIoctl(op string, ioctl uintptr, req string, off, length int64) error {
	if b.readOnly {
		return b.readOnlyError(op)
	}
	r := [2]uint64{uint64(off), uint64(length)}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(b.fd), ioctl, uintptr(unsafe.Pointer(&r))); e != 0 {
		return &os.PathError{Op: req, Path: b.f.Name(), Err: e}
	}
	return nil
}
