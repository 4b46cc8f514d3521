package vblock

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Stats is what Write did.
type Stats struct {
	Writes  uint64
	Errors  uint64
	Longest time.Duration // the slowest write: how long the application saw the device stall
}

func (s Stats) String() string {
	return fmt.Sprintf("%d writes, %d I/O errors, longest write %d ms", s.Writes, s.Errors, s.Longest.Milliseconds())
}

// openDirect opens dev with O_DIRECT and checks that the ledger's blocks
// fit in it.
func openDirect(dev string, flag int, l *Ledger) (*os.File, error) {
	f, err := os.OpenFile(dev, flag|unix.O_DIRECT, 0)
	if err != nil {
		return nil, err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, err
	}
	if need := int64(len(l.Entries)) * int64(l.BlockSize); size < need {
		f.Close()
		return nil, fmt.Errorf("%s has %d bytes, the ledger's blocks %d", dev, size, need)
	}
	return f, nil
}

// alignedBuf is n bytes on a page boundary, as O_DIRECT wants.
func alignedBuf(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
}

// WriteConfig says how Write writes.
type WriteConfig struct {
	Writers int             // goroutines, each with one write in flight
	Rounds  int             // passes over the blocks; 0: until the context is done
	OnError func(err error) // hears every I/O error (the run goes on)
}

// Write rewrites the ledger's blocks on dev, over and over, with
// c.Writers goroutines each owning every Writers-th block (so a block has
// one write in flight at a time, and the device several), until ctx is
// done or c.Rounds passes; the writes in flight then complete. Each
// write's counter is one above what the block may hold; the ledger
// records it acknowledged when the write returns.
func Write(ctx context.Context, dev string, l *Ledger, c WriteConfig) (Stats, error) {
	f, err := openDirect(dev, os.O_RDWR, l)
	if err != nil {
		return Stats{}, err
	}
	defer f.Close()
	var (
		mu    sync.Mutex
		total Stats
		wg    sync.WaitGroup
	)
	writers := max(1, min(c.Writers, len(l.Entries)))
	bufs := make([][]byte, writers)
	for w := range bufs {
		if bufs[w], err = alignedBuf(l.BlockSize); err != nil {
			return Stats{}, err
		}
		defer unix.Munmap(bufs[w])
	}
	for w := range writers {
		wg.Go(func() {
			s := writeBlocks(ctx, f, l, w, writers, bufs[w], c)
			mu.Lock()
			total.Writes += s.Writes
			total.Errors += s.Errors
			total.Longest = max(total.Longest, s.Longest)
			mu.Unlock()
		})
	}
	wg.Wait()
	return total, nil
}

// writeBlocks is writer w's loop over blocks w, w+step, w+2*step, ...
func writeBlocks(ctx context.Context, f *os.File, l *Ledger, w, step int, buf []byte, c WriteConfig) Stats {
	var s Stats
	for round := 0; c.Rounds == 0 || round < c.Rounds; round++ {
		for n := w; n < len(l.Entries); n += step {
			if ctx.Err() != nil {
				return s
			}
			e := &l.Entries[n]
			v := e.Next()
			Encode(buf, uint64(n), v)
			e.Pending = v
			start := time.Now()
			k, err := f.WriteAt(buf, int64(n)*int64(l.BlockSize))
			s.Longest = max(s.Longest, time.Since(start))
			s.Writes++
			if err == nil && k != len(buf) {
				err = fmt.Errorf("short write: %d of %d bytes", k, len(buf))
			}
			if err != nil {
				s.Errors++
				if c.OnError != nil {
					c.OnError(fmt.Errorf("block %d version %d: %w", n, v, err))
				}
				continue
			}
			e.Acked, e.Pending = v, 0
		}
	}
	return s
}

// Verify reads every block of the ledger from dev and checks it.
func Verify(dev string, l *Ledger) (Report, error) {
	f, err := openDirect(dev, os.O_RDONLY, l)
	if err != nil {
		return Report{}, err
	}
	defer f.Close()
	const chunk = 64 // blocks per read
	buf, err := alignedBuf(chunk * l.BlockSize)
	if err != nil {
		return Report{}, err
	}
	defer unix.Munmap(buf)
	var r Report
	for first := 0; first < len(l.Entries); first += chunk {
		n := min(chunk, len(l.Entries)-first)
		b := buf[:n*l.BlockSize]
		if _, err := f.ReadAt(b, int64(first)*int64(l.BlockSize)); err != nil {
			return r, fmt.Errorf("reading blocks %d-%d: %w", first, first+n-1, err)
		}
		for i := range n {
			l.Check(&r, first+i, b[i*l.BlockSize:(i+1)*l.BlockSize])
		}
	}
	return r, nil
}
