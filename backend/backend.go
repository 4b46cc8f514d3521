package backend

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Backend is the storage behind one namespace. Offsets and lengths are in
// bytes and always multiples of BlockSize(). Buffers passed in are registered
// (page-aligned, not Go heap) memory owned by the caller for the duration of
// the call; implementations must not retain them.
//
// All methods must be safe for concurrent use: several queue pairs issue I/O
// to one namespace at once.
type Backend interface {
	// ReadAt fills p entirely from offset off, or returns an error.
	ReadAt(p []byte, off int64) error
	// WriteAt writes p entirely at offset off, or returns an error.
	WriteAt(p []byte, off int64) error
	// Flush makes every completed write durable (fdatasync or device flush).
	Flush() error
	// Size is the capacity in bytes (a multiple of BlockSize).
	Size() int64
	// BlockSize is the logical block size in bytes (512 or 4096).
	BlockSize() uint32
	// Close releases the backing file or device.
	Close() error
}

// Discarder is implemented by backends that can deallocate a range
// (punch hole, BLKDISCARD). Whether the range then reads back as zeros is
// a trait of the backend (Traits.DiscardZeroes): a device may return old
// data after BLKDISCARD.
type Discarder interface {
	Discard(off, length int64) error
}

// Zeroer is implemented by backends that can write zeros to a range
// without a data buffer. The range reads back as zeros afterwards, always.
type Zeroer interface {
	WriteZeroes(off, length int64) error
}

// SyncWriter is implemented by backends that can make a single write
// durable (Force Unit Access): WriteAtSync returns only once p is on stable
// media. Callers fall back to WriteAt followed by Flush without it.
type SyncWriter interface {
	WriteAtSync(p []byte, off int64) error
}

// Traits are what a backend's data path guarantees. They decide what the
// target advertises (Identify VWC and DLFEAT) and how it honours Flush and
// FUA; the durability contract in docs/design.md lists them per backend.
type Traits struct {
	// VolatileCache: a completed write may be lost on power failure until
	// Flush (page cache, file system metadata, a device's write-back cache).
	VolatileCache bool
	// DiscardZeroes: a discarded range reads back as zeros.
	DiscardZeroes bool
}

// TraitsReporter is implemented by backends that know their traits.
type TraitsReporter interface {
	Traits() Traits
}

// TraitsOf returns b's traits. A backend that does not report them is
// assumed to cache writes and to return anything after a discard, the
// safe assumptions.
func TraitsOf(b Backend) Traits {
	if r, ok := b.(TraitsReporter); ok {
		return r.Traits()
	}
	return Traits{VolatileCache: true}
}

// WriteDurable writes p at off and returns once it is on stable media:
// through SyncWriter where b has it, otherwise a write and a flush.
func WriteDurable(b Backend, p []byte, off int64) error {
	if s, ok := b.(SyncWriter); ok {
		return s.WriteAtSync(p, off)
	}
	if err := b.WriteAt(p, off); err != nil {
		return err
	}
	return b.Flush()
}

// FileBacked is implemented by backends whose ReadAt, WriteAt, WriteAtSync
// and Flush are positional I/O on one descriptor: pread, pwrite, pwritev2
// with RWF_DSYNC, fdatasync. An asynchronous engine (io_uring) may then
// issue the same operations on Fd in their place, with the same
// durability, provided it also keeps the rules below.
type FileBacked interface {
	// Fd is the descriptor; it stays open until Close.
	Fd() int
	// Writable is false for a read-only backend, whose writes must fail
	// with ErrReadOnly instead of reaching the descriptor.
	Writable() bool
	// A read that ends early at end of file (0 bytes) reads zeros for the
	// rest, and a write that makes no progress fails (io.ErrShortWrite).
}

// Resizer is implemented by backends whose capacity can change while they
// serve: a file grows, nullblk takes any size, a block device is measured
// again (after lvextend, say).
type Resizer interface {
	// Resize sets the capacity to size bytes, rounded down to whole blocks
	// (a block device ignores size and re-reads its own), and returns it.
	Resize(size int64) (int64, error)
}

// NonBlocking is implemented by backends whose calls never sleep (nullblk),
// so the caller may run them on its polling thread instead of a worker.
type NonBlocking interface {
	NonBlocking() bool
}

// Options describe how to open a backend. They mirror the namespace section
// of the configuration file.
type Options struct {
	Path      string // file or block device path ("" for nullblk)
	Size      int64  // bytes; file: create or extend to this; nullblk: required; block: ignored (0)
	BlockSize uint32 // 512 or 4096; block: 0 means take the device's
	ReadOnly  bool
	Buffered  bool // file: use the page cache instead of O_DIRECT
	// Reserve (block) keeps that many bytes at the device's end out of
	// the namespace, for the daemon's own records (shared reservations).
	Reserve int64
	RBD     RBDOptions
}

// RBDOptions name a Ceph RBD image and how to reach its cluster.
type RBDOptions struct {
	Pool      string
	Namespace string // RADOS namespace within the pool; "" for the default
	Image     string
	Create    bool // create the image with Options.Size if it does not exist
	// ExclusiveLock refuses an image without the exclusive-lock feature:
	// a gateway group's image, written by one gateway after another,
	// needs librbd to hand the image's lock over between them, which
	// lets no write of the old writer land after one of the new.
	ExclusiveLock bool

	Conf    string // ceph.conf path ("" for librados' search path)
	User    string // cephx user, with or without "client." ("" for admin)
	Keyring string // "" for the keyring ceph.conf names
	// Client names a RADOS client of its own (a gateway group's): the
	// options with the same Client, conf, user and keyring share one
	// cluster connection; "" is the connection shared by all others.
	Client string
}

// Reconnecter is a backend on a cluster client that can be replaced
// (rbd): Reconnect reopens it on the connection its options name now,
// with no I/O in flight. A gateway group's images reconnect after the
// group's client was blocklisted and retired (RetireClient).
type Reconnecter interface {
	Reconnect() error
}

// ErrNoRBD is returned when opening an RBD namespace with a build that
// has no librbd (built with the norbd tag).
var ErrNoRBD = errors.New("this build has no RBD support (built with -tags norbd, or without cgo)")

// OpenFunc opens one kind of backend.
type OpenFunc func(Options) (Backend, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]OpenFunc{}
)

// ErrUnknown is returned by Open for a backend name nothing registered.
var ErrUnknown = errors.New("unknown backend")

// Register makes a backend kind available to Open under name.
func Register(name string, open OpenFunc) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry[name] = open
}

// Names lists the registered backend kinds, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	var names []string
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open opens a backend of the named kind.
func Open(name string, opts Options) (Backend, error) {
	registryMu.RLock()
	open := registry[name]
	registryMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknown, name)
	}
	return open(opts)
}
