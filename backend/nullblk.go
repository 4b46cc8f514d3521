package backend

import (
	"errors"
	"fmt"
	"sync/atomic"
)

func init() { Register("nullblk", openNull) }

// nullBackend discards writes and reads zeros, for benchmarks of everything
// but storage.
type nullBackend struct {
	size      atomic.Int64
	blockSize uint32
}

func openNull(opts Options) (Backend, error) {
	if opts.Size <= 0 {
		return nil, errors.New("nullblk backend: size is required")
	}
	bs := opts.BlockSize
	if bs == 0 {
		bs = 512
	}
	// Whole blocks only, as for files.
	size := opts.Size - opts.Size%int64(bs)
	if size == 0 {
		return nil, fmt.Errorf("nullblk backend: size %d is smaller than one %d-byte block", opts.Size, bs)
	}
	b := &nullBackend{blockSize: bs}
	b.size.Store(size)
	return b, nil
}

func (b *nullBackend) ReadAt(p []byte, off int64) error    { clear(p); return nil }
func (b *nullBackend) WriteAt(p []byte, off int64) error   { return nil }
func (b *nullBackend) Flush() error                        { return nil }
func (b *nullBackend) Discard(off, length int64) error     { return nil }
func (b *nullBackend) WriteZeroes(off, length int64) error { return nil }
func (b *nullBackend) Size() int64                         { return b.size.Load() }

// Resize takes any size of at least one block.
func (b *nullBackend) Resize(size int64) (int64, error) {
	size -= size % int64(b.blockSize)
	if size <= 0 {
		return b.size.Load(), fmt.Errorf("nullblk backend: size %d is smaller than one %d-byte block", size, b.blockSize)
	}
	b.size.Store(size)
	return size, nil
}
func (b *nullBackend) BlockSize() uint32 { return b.blockSize }
func (b *nullBackend) Close() error      { return nil }

// WriteAtSync: nothing is stored, so nothing can be lost.
func (b *nullBackend) WriteAtSync(p []byte, off int64) error { return nil }

// Traits: no cache, and every block reads zeros.
func (b *nullBackend) Traits() Traits { return Traits{VolatileCache: false, DiscardZeroes: true} }

// NonBlocking lets the caller run it on its polling thread.
func (b *nullBackend) NonBlocking() bool { return true }
