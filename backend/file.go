package backend

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() { Register("file", openFile) }

// fileBackend serves a namespace from a regular file.
type fileBackend struct {
	f         *os.File
	fd        int
	size      atomic.Int64
	blockSize uint32
	readOnly  bool
	path      string
}

// openFile opens the file at opts.Path, creating it sparse if missing.
// With Size set, a smaller file is extended (sparse) and the namespace is
// Size bytes even when the file is larger; with Size 0 the namespace is the
// file's current size. Either way the size is rounded down to whole blocks,
// so an odd-sized image exports what it can rather than failing.
func openFile(opts Options) (Backend, error) {
	if opts.Path == "" {
		return nil, errors.New("file backend: path is required")
	}
	bs := opts.BlockSize
	if bs == 0 {
		bs = 512
	}
	flags := os.O_RDWR
	if opts.ReadOnly {
		flags = os.O_RDONLY
	}
	st, statErr := os.Stat(opts.Path)
	switch {
	case statErr == nil && !st.Mode().IsRegular():
		return nil, fmt.Errorf("%s: not a regular file (use backend: block for devices)", opts.Path)
	case errors.Is(statErr, os.ErrNotExist):
		if opts.ReadOnly {
			return nil, fmt.Errorf("%s: read-only namespace, but the file does not exist", opts.Path)
		}
		if opts.Size <= 0 {
			return nil, fmt.Errorf("%s: file does not exist and no size is set to create it", opts.Path)
		}
		if err := os.MkdirAll(filepath.Dir(opts.Path), 0o755); err != nil {
			return nil, fmt.Errorf("create directory for %s: %w", opts.Path, err)
		}
		flags |= os.O_CREATE
	case statErr != nil:
		return nil, fmt.Errorf("%s: %w", opts.Path, statErr)
	}
	direct := 0
	if !opts.Buffered {
		direct = unix.O_DIRECT
	}
	f, err := os.OpenFile(opts.Path, flags|direct, 0o644)
	if err != nil {
		return nil, openError(opts.Path, direct != 0, err)
	}
	if direct != 0 {
		if align := directAlignment(int(f.Fd())); align > bs {
			f.Close()
			return nil, fmt.Errorf("%s: block_size %d is smaller than the %d-byte alignment O_DIRECT needs on this file system's device, so every I/O would fail; set block_size: %d (or buffered: true)", opts.Path, bs, align, align)
		}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", opts.Path, err)
	}
	size := opts.Size
	if size <= 0 {
		if fi.Size() == 0 {
			f.Close()
			return nil, fmt.Errorf("%s: file is empty and no size is set", opts.Path)
		}
		size = fi.Size()
	}
	if err := extend(f, fi.Size(), size, opts.ReadOnly); err != nil {
		f.Close()
		return nil, err
	}
	// Export whole blocks only.
	size -= size % int64(bs)
	if size == 0 {
		f.Close()
		return nil, fmt.Errorf("%s: smaller than one %d-byte block", opts.Path, bs)
	}
	b := &fileBackend{f: f, fd: int(f.Fd()), blockSize: bs, readOnly: opts.ReadOnly, path: opts.Path}
	b.size.Store(size)
	return b, nil
}

func (b *fileBackend) ReadAt(p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pread(b.fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "pread", Path: b.f.Name(), Err: err}
		}
		if n == 0 {
			// Past the end of a file shorter than the namespace: zeros.
			clear(p)
			return nil
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

func (b *fileBackend) WriteAt(p []byte, off int64) error {
	if b.readOnly {
		return b.readOnlyError("write")
	}
	for len(p) > 0 {
		n, err := unix.Pwrite(b.fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "pwrite", Path: b.f.Name(), Err: err}
		}
		if n == 0 {
			// Never expected, but looping on it would spin forever.
			return &os.PathError{Op: "pwrite", Path: b.f.Name(), Err: io.ErrShortWrite}
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// WriteAtSync writes with RWF_DSYNC, so each write returns once its data
// (and the metadata needed to read it back, such as a newly allocated block
// of a sparse file) is on stable media. For O_DIRECT on a block device the
// kernel sends the write with FUA, or follows it with a cache flush. Where
// the file system refuses the flag, a write and an fdatasync do the same.
func (b *fileBackend) WriteAtSync(p []byte, off int64) error {
	if b.readOnly {
		return b.readOnlyError("write")
	}
	for len(p) > 0 {
		iov := unix.Iovec{Base: &p[0]}
		iov.SetLen(len(p))
		r, _, e := unix.Syscall6(unix.SYS_PWRITEV2, uintptr(b.fd), uintptr(unsafe.Pointer(&iov)), 1,
			uintptr(off), uintptr(off>>32), unix.RWF_DSYNC)
		n := int(r)
		switch {
		case e == unix.EINTR:
			continue
		case e == unix.EOPNOTSUPP || e == unix.ENOSYS:
			if err := b.WriteAt(p, off); err != nil {
				return err
			}
			return b.Flush()
		case e != 0:
			return &os.PathError{Op: "pwritev2", Path: b.f.Name(), Err: e}
		case n == 0:
			return &os.PathError{Op: "pwritev2", Path: b.f.Name(), Err: io.ErrShortWrite}
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// Traits: files always need fdatasync, whatever the mode: the page cache
// holds buffered writes, and even O_DIRECT writes to a sparse file depend
// on block allocations that live in the file system's journal until then.
// A punched hole reads zeros.
func (b *fileBackend) Traits() Traits { return Traits{VolatileCache: true, DiscardZeroes: true} }

// Fd and Writable implement FileBacked, for block devices too: ReadAt,
// WriteAt, WriteAtSync and Flush are plain positional I/O on b.fd.
func (b *fileBackend) Fd() int        { return b.fd }
func (b *fileBackend) Writable() bool { return !b.readOnly }

func (b *fileBackend) Flush() error {
	if err := unix.Fdatasync(b.fd); err != nil {
		return &os.PathError{Op: "fdatasync", Path: b.f.Name(), Err: err}
	}
	return nil
}

func (b *fileBackend) Discard(off, length int64) error {
	if b.readOnly {
		return b.readOnlyError("discard")
	}
	err := unix.Fallocate(b.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, length)
	if err == unix.EOPNOTSUPP {
		return b.writeZeroesSlow(off, length)
	}
	if err != nil {
		return &os.PathError{Op: "punch hole", Path: b.f.Name(), Err: err}
	}
	return nil
}

func (b *fileBackend) WriteZeroes(off, length int64) error {
	if b.readOnly {
		return b.readOnlyError("write zeroes")
	}
	err := unix.Fallocate(b.fd, unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, length)
	if err == nil {
		return nil
	}
	if err != unix.EOPNOTSUPP {
		return &os.PathError{Op: "zero range", Path: b.f.Name(), Err: err}
	}
	return b.Discard(off, length)
}

// writeZeroesSlow writes zeros where the file system can neither punch
// holes nor zero ranges.
func (b *fileBackend) writeZeroesSlow(off, length int64) error {
	for length > 0 {
		n := min(length, int64(len(zeroPage)))
		if err := b.WriteAt(zeroPage[:n], off); err != nil {
			return err
		}
		off, length = off+n, length-n
	}
	return nil
}

func (b *fileBackend) Size() int64 { return b.size.Load() }

// Resize grows the file (sparse). Shrinking would cut off data hosts
// wrote, so it is refused.
func (b *fileBackend) Resize(size int64) (int64, error) {
	size -= size % int64(b.blockSize)
	cur := b.size.Load()
	switch {
	case size == cur:
		return cur, nil
	case size < cur:
		return cur, fmt.Errorf("%s: shrinking a file namespace from %d to %d bytes would cut off data; remove the namespace and add it again to shrink it", b.path, cur, size)
	}
	fi, err := b.f.Stat()
	if err != nil {
		return cur, err
	}
	if err := extend(b.f, fi.Size(), size, b.readOnly); err != nil {
		return cur, err
	}
	b.size.Store(size)
	return size, nil
}

// extend grows f from have to want bytes with ftruncate, which keeps it
// sparse. A read-only namespace never writes, so its file must be as large
// already.
func extend(f *os.File, have, want int64, readOnly bool) error {
	switch {
	case have >= want:
		return nil
	case readOnly:
		return fmt.Errorf("%s: read-only namespace, but the file (%d bytes) is smaller than size %d", f.Name(), have, want)
	}
	if err := f.Truncate(want); err != nil {
		return fmt.Errorf("extend %s to %d bytes: %w", f.Name(), want, err)
	}
	return nil
}
func (b *fileBackend) BlockSize() uint32 { return b.blockSize }
func (b *fileBackend) Close() error      { return b.f.Close() }

// directAlignment is the offset and length alignment O_DIRECT I/O on fd
// needs: what statx reports (Linux 6.1 and later), else the logical block
// size of the device holding the file system, else 0 (unknown).
func directAlignment(fd int) uint32 {
	var sx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &sx); err == nil &&
		sx.Mask&unix.STATX_DIOALIGN != 0 && sx.Dio_offset_align != 0 {
		return sx.Dio_offset_align
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || unix.Major(st.Dev) == 0 {
		return 0 // no block device behind it (tmpfs, network file systems)
	}
	var n uint32
	if v, ok := queueAttr(st.Dev, "logical_block_size"); ok {
		fmt.Sscan(v, &n)
	}
	return n
}

// openError explains a failed open: file systems without O_DIRECT support
// (tmpfs before Linux 6.6, some FUSE file systems) answer EINVAL.
func openError(path string, direct bool, err error) error {
	if direct && errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%s: the file system does not support O_DIRECT; set buffered: true for this namespace", path)
	}
	return fmt.Errorf("open %s: %w", path, err)
}

// ErrReadOnly is the cause of every write to a read-only backend.
var ErrReadOnly = errors.New("backend is read-only")

func (b *fileBackend) readOnlyError(op string) error {
	return &os.PathError{Op: op, Path: b.f.Name(), Err: ErrReadOnly}
}

// zeroPage is an aligned source of zeros for O_DIRECT writes.
var zeroPage = func() []byte {
	b, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		panic(err)
	}
	return b
}()
