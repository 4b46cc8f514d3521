package fabrics

import (
	"bytes"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// recorder is a namespace backend that counts how each write reached it,
// with traits set by the test.
type recorder struct {
	*memBackend
	traits                   backend.Traits
	writes, syncWrites       atomic.Int32
	flushes, discards, zeros atomic.Int32
	writeErr                 error

	flushGate  chan struct{} // if set, Flush waits for it
	flushing   atomic.Bool
	flushEnter chan struct{}
	closedMid  atomic.Bool // Close ran while a Flush was running
}

func newRecorder(tr backend.Traits) *recorder {
	return &recorder{memBackend: newMem(1<<20, 512), traits: tr}
}

func (r *recorder) Traits() backend.Traits { return r.traits }
func (r *recorder) WriteAt(p []byte, off int64) error {
	r.writes.Add(1)
	if r.writeErr != nil {
		return r.writeErr
	}
	return r.memBackend.WriteAt(p, off)
}
func (r *recorder) WriteAtSync(p []byte, off int64) error {
	r.syncWrites.Add(1)
	return r.memBackend.WriteAt(p, off)
}
func (r *recorder) Flush() error {
	r.flushes.Add(1)
	if r.flushGate != nil {
		r.flushing.Store(true)
		r.flushEnter <- struct{}{}
		<-r.flushGate
		r.flushing.Store(false)
	}
	return nil
}
func (r *recorder) Discard(off, n int64) error {
	r.discards.Add(1)
	return r.memBackend.Discard(off, n)
}
func (r *recorder) WriteZeroes(off, n int64) error {
	r.zeros.Add(1)
	return r.memBackend.Discard(off, n)
}
func (r *recorder) Close() error {
	if r.flushing.Load() {
		r.closedMid.Store(true)
	}
	return nil
}

// recorderTarget serves one namespace on rec.
func recorderTarget(t *testing.T, rec *recorder) *host {
	t.Helper()
	tg, p := targetWith(t, rec)
	return connect(t, tg, p, testNQN)
}

func (h *host) write(slba uint64, data []byte, cdw12 uint32) nvme.Status {
	h.t.Helper()
	c := ioCmd(nvme.IOWrite, 1, slba, len(data)/512, len(data))
	c.SetCDW(12, c.CDW(12)|cdw12)
	return h.submit(h.io, c, data).Status()
}

func identifyVWC(t *testing.T, h *host) byte {
	t.Helper()
	id, st := h.identify(nvme.CNSController, 0)
	if st != 0 {
		t.Fatalf("identify controller: %v", st)
	}
	return id[525] // VWC
}

func TestFUAWriteIsDurable(t *testing.T) {
	rec := newRecorder(backend.Traits{VolatileCache: true})
	h := recorderTarget(t, rec)
	buf := bytes.Repeat([]byte{5}, 4096)
	if st := h.write(0, buf, 0); st != 0 {
		t.Fatal(st)
	}
	if st := h.write(8, buf, nvme.CDW12FUA); st != 0 {
		t.Fatal(st)
	}
	if w, s := rec.writes.Load(), rec.syncWrites.Load(); w != 1 || s != 1 {
		t.Fatalf("plain + FUA write reached the backend as %d cached and %d durable writes, want 1 and 1", w, s)
	}
	// Write Zeroes with FUA is flushed before it completes.
	c := ioCmd(nvme.IOWriteZeroes, 1, 0, 8, 0)
	c.SetCDW(12, c.CDW(12)|nvme.CDW12FUA)
	if st := h.submit(h.io, c, nil).Status(); st != 0 || rec.flushes.Load() != 1 {
		t.Fatalf("FUA write zeroes: %v, %d flushes, want one", st, rec.flushes.Load())
	}
}

func TestWriteCacheFeature(t *testing.T) {
	rec := newRecorder(backend.Traits{VolatileCache: true})
	h := recorderTarget(t, rec)
	if vwc := identifyVWC(t, h); vwc != 0x7 {
		t.Fatalf("VWC %#x for a namespace with a volatile cache, want 0x7", vwc)
	}
	if v, st := h.feature(false, nvme.FeatVolatileWC, 0); st != 0 || v != 1 {
		t.Fatalf("get volatile write cache: %v %d, want enabled", st, v)
	}
	buf := bytes.Repeat([]byte{5}, 512)
	h.write(0, buf, 0)
	if _, st := h.feature(true, nvme.FeatVolatileWC, 0); st != 0 {
		t.Fatalf("disable volatile write cache: %v", st)
	}
	if rec.flushes.Load() != 1 {
		t.Fatalf("%d flushes when the host disabled the write cache, want 1: it now trusts cached writes to be on media", rec.flushes.Load())
	}
	if v, _ := h.feature(false, nvme.FeatVolatileWC, 0); v != 0 {
		t.Fatalf("get volatile write cache after disabling: %d", v)
	}
	h.write(0, buf, 0)
	if s := rec.syncWrites.Load(); s != 1 {
		t.Fatalf("a write with the cache disabled was not durable (%d durable writes)", s)
	}
	if _, st := h.feature(true, nvme.FeatVolatileWC, 1); st != 0 {
		t.Fatalf("enable volatile write cache: %v", st)
	}
	h.write(0, buf, 0)
	if w := rec.writes.Load(); w != 2 {
		t.Fatalf("%d cached writes after re-enabling the cache, want 2", w)
	}
}

func TestNoWriteCacheReported(t *testing.T) {
	rec := newRecorder(backend.Traits{VolatileCache: false, DiscardZeroes: true})
	h := recorderTarget(t, rec)
	if vwc := identifyVWC(t, h); vwc != 0 {
		t.Fatalf("VWC %#x for a subsystem without a volatile cache, want 0", vwc)
	}
	if _, st := h.feature(true, nvme.FeatVolatileWC, 1); st != nvme.StatusInvalidField|nvme.DNR {
		t.Fatalf("enabling a write cache that does not exist: %v, want Invalid Field", st)
	}
	// A namespace with a cache added later is written through for this
	// controller: its host will never flush it.
	cached := newRecorder(backend.Traits{VolatileCache: true})
	ns, _ := NewNamespace(2, cached, false, [16]byte{2})
	s := h.io.Queue.ctrl.Subsystem
	if err := s.AddNamespace(ns); err != nil {
		t.Fatal(err)
	}
	c := ioCmd(nvme.IOWrite, 2, 0, 1, 512)
	if st := h.submit(h.io, c, make([]byte, 512)).Status(); st != 0 {
		t.Fatal(st)
	}
	if cached.syncWrites.Load() != 1 {
		t.Fatal("write to a cached namespace on a controller without VWC was not durable")
	}
}

func TestWriteZeroesReadsZeroes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		discardZeroes bool
		wantDiscards  int32
		wantDLFEAT    byte
	}{
		{"holes read zeros", true, 1, 0x9},
		{"discard may keep old data", false, 0, 0x8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(backend.Traits{VolatileCache: true, DiscardZeroes: tc.discardZeroes})
			h := recorderTarget(t, rec)
			c := ioCmd(nvme.IOWriteZeroes, 1, 0, 8, 0)
			c.SetCDW(12, c.CDW(12)|nvme.CDW12DEAC)
			if st := h.submit(h.io, c, nil).Status(); st != 0 {
				t.Fatal(st)
			}
			if d, z := rec.discards.Load(), rec.zeros.Load(); d != tc.wantDiscards || d+z != 1 {
				t.Fatalf("write zeroes with DEAC: %d discards, %d zeroings; want %d discards", d, z, tc.wantDiscards)
			}
			id, _ := h.identify(nvme.CNSNamespace, 1)
			if dlfeat := id[33]; dlfeat != tc.wantDLFEAT {
				t.Fatalf("DLFEAT %#x, want %#x", dlfeat, tc.wantDLFEAT)
			}
		})
	}
}

func TestFlushAllRunsOffThePollerAndHoldsNamespaces(t *testing.T) {
	rec := newRecorder(backend.Traits{VolatileCache: true})
	rec.flushGate, rec.flushEnter = make(chan struct{}), make(chan struct{}, 1)
	h := recorderTarget(t, rec)
	var release sync.Once
	releaseFlush := func() { release.Do(func() { close(rec.flushGate) }) }
	t.Cleanup(releaseFlush) // a failure must not leave the queue stuck
	fl := flushCmd(0xffffffff)
	flushed := make(chan nvme.Completion, 1)
	go func() { flushed <- <-h.io.SubmitAsync(fl, nil) }()
	<-rec.flushEnter

	// The queue keeps serving while the flush runs.
	rd := ioCmd(nvme.IORead, 1, 0, 1, 512)
	read := make(chan nvme.Completion, 1)
	go func() { read <- <-h.io.SubmitAsync(rd, make([]byte, 512)) }()
	select {
	case rsp := <-read:
		if rsp == nil || rsp.Status() != 0 {
			t.Fatalf("read during a flush: %v", rsp)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read waited for a broadcast flush: the flush blocks the queue's poller")
	}
	// The namespace is held, so its removal waits for the flush.
	s := h.io.Queue.ctrl.Subsystem
	ns := s.Namespace(1)
	if ns.InFlight() == 0 {
		t.Fatal("namespace not held during a broadcast flush: a removal would close it under the flush")
	}
	removed := make(chan error, 1)
	go func() { removed <- s.RemoveNamespace(1) }()
	releaseFlush()
	if rsp := <-flushed; rsp == nil || rsp.Status() != 0 {
		t.Fatalf("broadcast flush: %v", rsp)
	}
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	if rec.closedMid.Load() {
		t.Fatal("backend closed while it flushed")
	}
}

// slowCompare blocks the first read until released, to hold a fused pair
// between its compare and its write.
type slowCompare struct {
	*memBackend
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (s *slowCompare) ReadAt(p []byte, off int64) error {
	s.once.Do(func() { s.entered <- struct{}{}; <-s.release })
	return s.memBackend.ReadAt(p, off)
}

func TestFusedPairAtomicAgainstPlainWrites(t *testing.T) {
	tg, p, _ := testTarget(t)
	sc := &slowCompare{memBackend: newMem(1<<20, 512), entered: make(chan struct{}, 1), release: make(chan struct{})}
	s := tg.Subsystem(testNQN)
	s.RemoveNamespace(1)
	ns, _ := NewNamespace(1, sc, false, [16]byte{1})
	if err := s.AddNamespace(ns); err != nil {
		t.Fatal(err)
	}
	h := connect(t, tg, p, testNQN)
	io2 := NewLoopQueue(tg, p, 2, 128)
	t.Cleanup(io2.Close)
	if rsp := h.submit(io2, connectCmd(2, 127, 0, true), connectData(testNQN, testHost, h.cntl)); rsp.Status() != 0 {
		t.Fatalf("second I/O queue: %v", rsp.Status())
	}

	zeros, lock, other := make([]byte, 512), bytes.Repeat([]byte{1}, 512), bytes.Repeat([]byte{2}, 512)
	c := ioCmd(nvme.IOCompare, 1, 4, 1, 512)
	c.SetFlags(c.Flags() | nvme.FuseFirst)
	first := h.io.SubmitAsync(c, zeros)
	w := ioCmd(nvme.IOWrite, 1, 4, 1, 512)
	w.SetFlags(w.Flags() | nvme.FuseSecond)
	second := h.io.SubmitAsync(w, lock)
	<-sc.entered // the pair has read the blocks and not yet written
	var release sync.Once
	releaseCompare := func() { release.Do(func() { close(sc.release) }) }
	t.Cleanup(releaseCompare)

	plain := io2.SubmitAsync(ioCmd(nvme.IOWrite, 1, 4, 1, 512), other)
	// Either the plain write waits at the gate or, wrongly, completes.
	waited := make(chan struct{})
	go func() {
		g := &ns.gate
		g.mu.Lock()
		for g.waits.Load() == 0 {
			g.cond.Wait()
		}
		g.mu.Unlock()
		close(waited)
	}()
	select {
	case <-waited:
	case <-plain:
		t.Fatal("a plain write landed between a fused compare and its write")
	}
	releaseCompare()
	if f, s := <-first, <-second; f.Status() != 0 || s.Status() != 0 {
		t.Fatalf("fused pair: %v %v", f.Status(), s.Status())
	}
	if rsp := <-plain; rsp.Status() != 0 {
		t.Fatalf("plain write: %v", rsp.Status())
	}
	if got := sc.data[4*512 : 5*512]; !bytes.Equal(got, other) {
		t.Fatalf("blocks hold %d..., want the plain write's data, written after the pair", got[0])
	}
}

func TestBackendErrnoStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want nvme.Status
	}{
		{syscall.ENOSPC, nvme.StatusCapacityExceeded | nvme.DNR},
		{syscall.EDQUOT, nvme.StatusCapacityExceeded | nvme.DNR},
		{syscall.EROFS, nvme.StatusNamespaceWriteProt | nvme.DNR},
		{syscall.EIO, nvme.StatusWriteFault},
		{syscall.ENOMEM, nvme.StatusInternal},
		{syscall.ETIMEDOUT, nvme.StatusNamespaceNotReady},
		{&os.PathError{Op: "write", Path: "rbd:rbd/img", Err: syscall.ENOTCONN}, nvme.StatusNamespaceNotReady},
	} {
		rec := newRecorder(backend.Traits{VolatileCache: true})
		rec.writeErr = tc.err
		h := recorderTarget(t, rec)
		if st := h.write(0, make([]byte, 512), 0); st != tc.want {
			t.Errorf("write failing with %v: status %v, want %v", tc.err, st, tc.want)
		}
	}
	if st := ioStatus(syscall.EIO, false); st != nvme.StatusReadError {
		t.Errorf("read EIO: %v, want Unrecovered Read Error", st)
	}
}

func TestRemovalAndShutdownFlushFirst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close func(*Target)
	}{
		{"namespace removed", func(tg *Target) { tg.Subsystem(testNQN).RemoveNamespace(1) }},
		{"target shut down", (*Target).Close},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(backend.Traits{VolatileCache: true})
			h := recorderTarget(t, rec)
			h.write(0, make([]byte, 512), 0)
			tc.close(h.io.Queue.target)
			if rec.flushes.Load() != 1 {
				t.Fatalf("%d flushes before the backend closed, want 1", rec.flushes.Load())
			}
		})
	}
}
