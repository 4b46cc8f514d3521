package backend

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() { Register("block", openBlock) }

// blockBackend serves a namespace from a block device with O_DIRECT.
type blockBackend struct {
	fileBackend
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
	b := &blockBackend{fileBackend{f: f, fd: fd, blockSize: uint32(lbs), readOnly: opts.ReadOnly, path: opts.Path}}
	if _, err := b.Resize(0); err != nil {
		f.Close()
		return nil, err
	}
	return b, nil
}

// Resize measures the device (again); the size asked for is ignored.
func (b *blockBackend) Resize(int64) (int64, error) {
	var size uint64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(b.fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size))); e != 0 {
		return b.size.Load(), fmt.Errorf("%s: BLKGETSIZE64: %w", b.path, e)
	}
	n := int64(size) - int64(size)%int64(b.blockSize)
	b.size.Store(n)
	return n, nil
}

func (b *blockBackend) Discard(off, length int64) error {
	if b.readOnly {
		return b.readOnlyError("discard")
	}
	r := [2]uint64{uint64(off), uint64(length)}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(b.fd), unix.BLKDISCARD, uintptr(unsafe.Pointer(&r))); e != 0 {
		return &os.PathError{Op: "BLKDISCARD", Path: b.f.Name(), Err: e}
	}
	return nil
}

func (b *blockBackend) WriteZeroes(off, length int64) error {
	if b.readOnly {
		return b.readOnlyError("write zeroes")
	}
	r := [2]uint64{uint64(off), uint64(length)}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(b.fd), unix.BLKZEROOUT, uintptr(unsafe.Pointer(&r))); e != 0 {
		return &os.PathError{Op: "BLKZEROOUT", Path: b.f.Name(), Err: e}
	}
	return nil
}
