package durability

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	"golang.org/x/sys/unix"
)

// How the writer makes its FUA-region writes durable.
const (
	DurableDSync     = "dsync"     // RWF_DSYNC on each write: FUA on the wire, no flush
	DurableFdatasync = "fdatasync" // plain writes, then fdatasync: an NVMe Flush
)

// WriterConfig says what Write does.
type WriterConfig struct {
	Device    string // opened O_DIRECT
	BlockSize int    // bytes per write, a multiple of the device's logical block size
	Blocks    int64  // blocks used from the device's start
	Batches   int    // batches of Depth writes to run
	Depth     int    // writes in flight per batch, to distinct blocks
	Durable   string // DurableDSync or DurableFdatasync
	Seed      uint64
	// Mark, when set, is called after every MarkEvery-th durable batch,
	// with no write in flight, to set a dm-log-writes mark.
	Mark      func(name string) error
	MarkEvery int
	Record    io.Writer
	// Progress, when set, is called after each batch with its number.
	Progress func(batch int)
}

// WriterStats counts what Write did.
type WriterStats struct {
	DSyncBatches, FlushBatches, UnflushedBatches, Writes, Flushes, Marks int
}

func (s WriterStats) String() string {
	return fmt.Sprintf("%d writes in %d dsync, %d flushed and %d unflushed batches; %d fdatasyncs, %d marks",
		s.Writes, s.DSyncBatches, s.FlushBatches, s.UnflushedBatches, s.Flushes, s.Marks)
}

// Write runs the workload: batches of Depth concurrent writes, each batch
// one of
//
//   - durable by itself: to the first half of the blocks, each write with
//     RWF_DSYNC (or, with DurableFdatasync, plain and followed by
//     fdatasync);
//   - flushed: plain writes to the second half, then fdatasync, which also
//     makes durable every earlier unflushed write;
//   - unflushed: plain writes to the second half, never flushed by this
//     batch.
//
// The halves keep FUA and plain writes to different blocks: dm-log-writes
// logs a plain write only when a later flush completes, so a plain write
// followed by a FUA write to the same block would be logged after the FUA
// write, in the wrong order.
func Write(cfg WriterConfig) (WriterStats, error) {
	var st WriterStats
	if cfg.Durable != DurableDSync && cfg.Durable != DurableFdatasync {
		return st, fmt.Errorf("durable %q: want %s or %s", cfg.Durable, DurableDSync, DurableFdatasync)
	}
	if cfg.BlockSize < MinBlockSize || cfg.BlockSize%512 != 0 {
		return st, fmt.Errorf("block size %d: want a multiple of 512 from %d", cfg.BlockSize, MinBlockSize)
	}
	half := cfg.Blocks / 2
	if cfg.Depth < 1 || int64(cfg.Depth) > half {
		return st, fmt.Errorf("depth %d: want 1 to half the %d blocks", cfg.Depth, cfg.Blocks)
	}
	f, err := os.OpenFile(cfg.Device, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		return st, err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return st, err
	}
	if need := cfg.Blocks * int64(cfg.BlockSize); size < need {
		return st, fmt.Errorf("%s: %d bytes, the workload needs %d", cfg.Device, size, need)
	}
	fd := int(f.Fd())
	// O_DIRECT wants aligned buffers: page-aligned memory from mmap.
	mem, err := unix.Mmap(-1, 0, cfg.Depth*cfg.BlockSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return st, fmt.Errorf("mmap write buffers: %w", err)
	}
	defer unix.Munmap(mem)
	a, err := newAIO(cfg.Depth)
	if err != nil {
		return st, err
	}
	defer a.close()
	rec, err := NewRecordWriter(cfg.Record, cfg.BlockSize)
	if err != nil {
		return st, err
	}

	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6475726162696c69))
	bufs := make([][]byte, cfg.Depth)
	offs := make([]int64, cfg.Depth)
	blocks := make([]int64, cfg.Depth)
	seqs := make([]uint64, cfg.Depth)
	var seq uint64
	unflushed := map[int64]uint64{} // plain-region block → acked, not yet flushed write
	durableBatches := 0

	// pick fills blocks with distinct blocks of [from, from+n).
	pick := func(from, n int64) {
		for i := range blocks {
		again:
			b := from + rng.Int64N(n)
			for _, x := range blocks[:i] {
				if x == b {
					goto again
				}
			}
			blocks[i] = b
		}
	}
	write := func(rwFlags int) error {
		for i, b := range blocks {
			seq++
			seqs[i] = seq
			bufs[i] = mem[i*cfg.BlockSize : (i+1)*cfg.BlockSize]
			offs[i] = b * int64(cfg.BlockSize)
			FillBlock(bufs[i], b, seq)
		}
		if err := a.pwrite(fd, bufs, offs, rwFlags); err != nil {
			return err
		}
		st.Writes += len(blocks)
		return nil
	}
	// writeCached writes the batch without FUA: acknowledged, durable
	// only once a flush follows.
	writeCached := func() error {
		if err := write(0); err != nil {
			return err
		}
		for i, b := range blocks {
			rec.Acked(b, seqs[i])
			unflushed[b] = seqs[i]
		}
		return nil
	}
	flush := func() error {
		if err := unix.Fdatasync(fd); err != nil {
			return fmt.Errorf("fdatasync %s: %w", cfg.Device, err)
		}
		st.Flushes++
		for b, s := range unflushed {
			rec.Durable(b, s)
		}
		clear(unflushed)
		return nil
	}

	for batch := range cfg.Batches {
		durable := true
		switch k := rng.IntN(10); {
		case k < 4:
			st.DSyncBatches++
			pick(0, half)
			if cfg.Durable == DurableDSync {
				if err := write(unix.RWF_DSYNC); err != nil {
					return st, err
				}
				for i, b := range blocks {
					rec.Durable(b, seqs[i])
				}
				break
			}
			if err := writeCached(); err != nil {
				return st, err
			}
			if err := flush(); err != nil {
				return st, err
			}
		case k < 7:
			st.FlushBatches++
			pick(half, cfg.Blocks-half)
			if err := writeCached(); err != nil {
				return st, err
			}
			if err := flush(); err != nil {
				return st, err
			}
		default:
			st.UnflushedBatches++
			durable = false
			pick(half, cfg.Blocks-half)
			if err := writeCached(); err != nil {
				return st, err
			}
		}
		if durable {
			durableBatches++
		}
		if durable && cfg.Mark != nil && cfg.MarkEvery > 0 && durableBatches%cfg.MarkEvery == 0 {
			name := fmt.Sprintf("m%05d", st.Marks+1)
			if err := cfg.Mark(name); err != nil {
				return st, fmt.Errorf("set mark %s: %w", name, err)
			}
			rec.Mark(name)
			st.Marks++
		}
		if err := rec.Flush(); err != nil {
			return st, fmt.Errorf("record: %w", err)
		}
		if cfg.Progress != nil {
			cfg.Progress(batch + 1)
		}
	}
	return st, rec.Flush()
}
