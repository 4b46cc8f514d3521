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
	if err := cfg.check(); err != nil {
		return WriterStats{}, err
	}
	w, err := openWriter(cfg)
	if err != nil {
		return WriterStats{}, err
	}
	defer w.close()
	for batch := range cfg.Batches {
		durable, err := w.batch()
		if err != nil {
			return w.st, err
		}
		if durable {
			w.durableBatches++
			if cfg.Mark != nil && cfg.MarkEvery > 0 && w.durableBatches%cfg.MarkEvery == 0 {
				if err := w.mark(); err != nil {
					return w.st, err
				}
			}
		}
		if err := w.rec.Flush(); err != nil {
			return w.st, fmt.Errorf("record: %w", err)
		}
		if cfg.Progress != nil {
			cfg.Progress(batch + 1)
		}
	}
	return w.st, w.rec.Flush()
}

// check rejects a configuration Write cannot run.
func (cfg WriterConfig) check() error {
	if cfg.Durable != DurableDSync && cfg.Durable != DurableFdatasync {
		return fmt.Errorf("durable %q: want %s or %s", cfg.Durable, DurableDSync, DurableFdatasync)
	}
	if cfg.BlockSize < MinBlockSize || cfg.BlockSize%512 != 0 {
		return fmt.Errorf("block size %d: want a multiple of 512 from %d", cfg.BlockSize, MinBlockSize)
	}
	if cfg.Depth < 1 || int64(cfg.Depth) > cfg.Blocks/2 {
		return fmt.Errorf("depth %d: want 1 to half the %d blocks", cfg.Depth, cfg.Blocks)
	}
	return nil
}

// writer is one run of Write: the device, the buffers of a batch and what
// the record has yet to learn.
type writer struct {
	cfg    WriterConfig
	f      *os.File
	fd     int
	mem    []byte // page-aligned buffers for O_DIRECT, Depth blocks
	a      *aio
	rec    *RecordWriter
	rng    *rand.Rand
	half   int64
	bufs   [][]byte
	offs   []int64
	blocks []int64 // the batch's blocks, distinct
	seqs   []uint64
	seq    uint64
	// unflushed maps a plain-region block to its acknowledged write not
	// yet flushed.
	unflushed      map[int64]uint64
	durableBatches int
	st             WriterStats
}

// openWriter opens the device, checks it is large enough and sets up the
// buffers, the AIO context and the record.
func openWriter(cfg WriterConfig) (*writer, error) {
	f, err := os.OpenFile(cfg.Device, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		return nil, err
	}
	w := &writer{cfg: cfg, f: f, fd: int(f.Fd()), half: cfg.Blocks / 2,
		rng:  rand.New(rand.NewPCG(cfg.Seed, 0x6475726162696c69)),
		bufs: make([][]byte, cfg.Depth), offs: make([]int64, cfg.Depth),
		blocks: make([]int64, cfg.Depth), seqs: make([]uint64, cfg.Depth),
		unflushed: map[int64]uint64{}}
	if err := w.setUp(); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *writer) setUp() error {
	size, err := w.f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if need := w.cfg.Blocks * int64(w.cfg.BlockSize); size < need {
		return fmt.Errorf("%s: %d bytes, the workload needs %d", w.cfg.Device, size, need)
	}
	// O_DIRECT wants aligned buffers: page-aligned memory from mmap.
	w.mem, err = unix.Mmap(-1, 0, w.cfg.Depth*w.cfg.BlockSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("mmap write buffers: %w", err)
	}
	if w.a, err = newAIO(w.cfg.Depth); err != nil {
		return err
	}
	w.rec, err = NewRecordWriter(w.cfg.Record, w.cfg.BlockSize)
	return err
}

func (w *writer) close() {
	if w.a != nil {
		w.a.close()
	}
	if w.mem != nil {
		unix.Munmap(w.mem)
	}
	w.f.Close()
}

// batch runs one batch of the kind the random draw picks and reports
// whether it left every write of it durable.
func (w *writer) batch() (durable bool, err error) {
	switch k := w.rng.IntN(10); {
	case k < 4:
		w.st.DSyncBatches++
		w.pick(0, w.half)
		if w.cfg.Durable == DurableDSync {
			if err := w.write(unix.RWF_DSYNC); err != nil {
				return true, err
			}
			for i, b := range w.blocks {
				w.rec.Durable(b, w.seqs[i])
			}
			return true, nil
		}
		return true, w.writeFlushed()
	case k < 7:
		w.st.FlushBatches++
		w.pick(w.half, w.cfg.Blocks-w.half)
		return true, w.writeFlushed()
	default:
		w.st.UnflushedBatches++
		w.pick(w.half, w.cfg.Blocks-w.half)
		return false, w.writeCached()
	}
}

// pick fills blocks with distinct blocks of [from, from+n).
func (w *writer) pick(from, n int64) {
	for i := range w.blocks {
	again:
		b := from + w.rng.Int64N(n)
		for _, x := range w.blocks[:i] {
			if x == b {
				goto again
			}
		}
		w.blocks[i] = b
	}
}

// write writes the batch's blocks, each with the next sequence number.
func (w *writer) write(rwFlags int) error {
	bs := w.cfg.BlockSize
	for i, b := range w.blocks {
		w.seq++
		w.seqs[i] = w.seq
		w.bufs[i] = w.mem[i*bs : (i+1)*bs]
		w.offs[i] = b * int64(bs)
		FillBlock(w.bufs[i], b, w.seq)
	}
	if err := w.a.pwrite(w.fd, w.bufs, w.offs, rwFlags); err != nil {
		return err
	}
	w.st.Writes += len(w.blocks)
	return nil
}

// writeCached writes the batch without FUA: acknowledged, durable only
// once a flush follows.
func (w *writer) writeCached() error {
	if err := w.write(0); err != nil {
		return err
	}
	for i, b := range w.blocks {
		w.rec.Acked(b, w.seqs[i])
		w.unflushed[b] = w.seqs[i]
	}
	return nil
}

// writeFlushed writes the batch without FUA, then flushes.
func (w *writer) writeFlushed() error {
	if err := w.writeCached(); err != nil {
		return err
	}
	return w.flush()
}

// flush makes every acknowledged write durable with fdatasync.
func (w *writer) flush() error {
	if err := unix.Fdatasync(w.fd); err != nil {
		return fmt.Errorf("fdatasync %s: %w", w.cfg.Device, err)
	}
	w.st.Flushes++
	for b, s := range w.unflushed {
		w.rec.Durable(b, s)
	}
	clear(w.unflushed)
	return nil
}

// mark sets the next dm-log-writes mark, with no write in flight, and
// records it.
func (w *writer) mark() error {
	name := fmt.Sprintf("m%05d", w.st.Marks+1)
	if err := w.cfg.Mark(name); err != nil {
		return fmt.Errorf("set mark %s: %w", name, err)
	}
	w.rec.Mark(name)
	w.st.Marks++
	return nil
}
