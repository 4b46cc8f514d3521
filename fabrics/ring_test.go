package fabrics

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/backend/uring"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

var engines = []IOEngine{EngineThreads, EngineIOURing}

// fileTarget serves a buffered file backend of size bytes as namespace 1
// with engine e, and connects a host to it.
func fileTarget(t *testing.T, e IOEngine, size int64) (*host, string, backend.Backend) {
	t.Helper()
	if e == EngineIOURing {
		if err := uring.Probe(); err != nil {
			t.Fatalf("io_uring is needed for this test: %v", err)
		}
	}
	path := filepath.Join(t.TempDir(), "ns1.img")
	b, err := backend.Open("file", backend.Options{Path: path, Size: size, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	tg, p := targetWith(t, b)
	tg.SetIOEngine(e)
	return connect(t, tg, p, testNQN), path, b
}

// checkEngine fails unless the queue's file I/O went where e sends it.
func checkEngine(t *testing.T, h *host, e IOEngine) {
	t.Helper()
	h.io.mu.Lock()
	used := h.io.Queue.ring != nil
	h.io.mu.Unlock()
	if used != (e == EngineIOURing) {
		t.Fatalf("engine %v: ring in use %v", e, used)
	}
}

func TestFileEngines(t *testing.T) {
	for _, e := range engines {
		t.Run(e.String(), func(t *testing.T) {
			h, path, _ := fileTarget(t, e, 1<<20)
			data := bytes.Repeat([]byte("0123456789abcdef"), 512) // 16 blocks
			if st := h.rw(nvme.IOWrite, 1, 8, 16, data, false); st != 0 {
				t.Fatalf("write: %v", st)
			}
			fua := newCmd(nvme.IOWrite)
			fua.SetNSID(1)
			fua.SetSLBA(100)
			fua.SetCDW(12, 1<<30) // FUA, 1 block
			if st := h.submit(h.io, keyed(fua, 512), data[:512]).Status(); st != 0 {
				t.Fatalf("FUA write: %v", st)
			}
			if st := h.submit(h.io, flushCmd(1), nil).Status(); st != 0 {
				t.Fatalf("flush: %v", st)
			}
			got := make([]byte, len(data))
			if st := h.rw(nvme.IORead, 1, 8, 16, got, false); st != 0 || !bytes.Equal(got, data) {
				t.Fatalf("read back: %v, equal %v", st, bytes.Equal(got, data))
			}
			onDisk, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(onDisk[8*512:24*512], data) || !bytes.Equal(onDisk[100*512:101*512], data[:512]) {
				t.Fatalf("the file does not hold the writes (%v)", err)
			}
			checkEngine(t, h, e)
		})
	}
}

// A file cut short under the namespace reads back zeros past its end, on
// either engine (the ring resubmits the short read, then sees EOF).
func TestFileShortRead(t *testing.T) {
	for _, e := range engines {
		t.Run(e.String(), func(t *testing.T) {
			h, path, _ := fileTarget(t, e, 1<<20)
			data := bytes.Repeat([]byte{0xa5}, 8192)
			if st := h.rw(nvme.IOWrite, 1, 0, 16, data, false); st != 0 {
				t.Fatalf("write: %v", st)
			}
			if err := os.Truncate(path, 6000); err != nil {
				t.Fatal(err)
			}
			got := bytes.Repeat([]byte{0xff}, 8192)
			if st := h.rw(nvme.IORead, 1, 0, 16, got, false); st != 0 {
				t.Fatalf("read: %v", st)
			}
			want := append(data[:6000:6000], make([]byte, 8192-6000)...)
			if !bytes.Equal(got, want) {
				t.Fatal("a read across the end of the file is not data then zeros")
			}
			checkEngine(t, h, e)
		})
	}
}

// A backend error becomes the same status on either engine: here the
// descriptor is closed under the namespace (EBADF).
func TestFileErrorStatus(t *testing.T) {
	for _, e := range engines {
		t.Run(e.String(), func(t *testing.T) {
			h, _, b := fileTarget(t, e, 1<<20)
			buf := make([]byte, 512)
			if st := h.rw(nvme.IORead, 1, 0, 1, buf, false); st != 0 {
				t.Fatalf("read: %v", st)
			}
			b.Close()
			if st := h.rw(nvme.IORead, 1, 0, 1, buf, false); st != nvme.StatusReadError {
				t.Fatalf("read from a closed descriptor: %v, want %v", st, nvme.StatusReadError)
			}
			if st := h.rw(nvme.IOWrite, 1, 0, 1, buf, false); st != nvme.StatusWriteFault {
				t.Fatalf("write to a closed descriptor: %v, want %v", st, nvme.StatusWriteFault)
			}
		})
	}
}

// noSyncWriter is a file backend without WriteAtSync, as a backend that
// makes writes durable only by Flush: a durable write through the ring is
// then a write and an fdatasync.
type noSyncWriter struct {
	backend.Backend
	backend.FileBacked
}

func TestRingDurableWriteWithoutDSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ns1.img")
	b, err := backend.Open("file", backend.Options{Path: path, Size: 1 << 20, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	nb := noSyncWriter{b, b.(backend.FileBacked)}
	tg, p := targetWith(t, nb)
	tg.SetIOEngine(EngineIOURing)
	h := connect(t, tg, p, testNQN)
	c := ioCmd(nvme.IOWrite, 1, 3, 2, 1024)
	c.SetCDW(12, 1|1<<30) // FUA
	var r Request
	r.ns = tg.Subsystem(testNQN).Namespace(1)
	r.Cmd = c
	r.q = h.io.Queue
	if step, ok := ringStepOf(&r); !ok || step != stepWriteSync {
		t.Fatalf("step %v %v, want write then fdatasync", step, ok)
	}
	data := bytes.Repeat([]byte{3}, 1024)
	if st := h.submit(h.io, c, data).Status(); st != 0 {
		t.Fatalf("FUA write: %v", st)
	}
	onDisk, _ := os.ReadFile(path)
	if !bytes.Equal(onDisk[3*512:5*512], data) {
		t.Fatal("the durable write is not in the file")
	}
	checkEngine(t, h, EngineIOURing)
}

// The whole queue depth is in the ring at once, and closing the queue
// with operations in flight waits for them instead of hanging or freeing
// buffers under the kernel.
func TestRingDepthAndClose(t *testing.T) {
	h, _, _ := fileTarget(t, EngineIOURing, 4<<20)
	const n = 100
	chans := make([]<-chan nvme.Completion, n)
	for i := range n {
		c := ioCmd(nvme.IOWrite, 1, uint64(i*16), 16, 8192)
		c.SetCID(uint16(i + 100))
		chans[i] = h.io.SubmitAsync(c, bytes.Repeat([]byte{byte(i)}, 8192))
	}
	for i, ch := range chans {
		if rsp := <-ch; rsp == nil || rsp.Status() != 0 {
			t.Fatalf("write %d: %v", i, rsp)
		}
	}
	for i := range n {
		got := make([]byte, 8192)
		if st := h.rw(nvme.IORead, 1, uint64(i*16), 16, got, false); st != 0 || got[0] != byte(i) || got[8191] != byte(i) {
			t.Fatalf("read %d: %v %d", i, st, got[0])
		}
	}
	for i := range n {
		c := ioCmd(nvme.IORead, 1, uint64(i*16), 16, 8192)
		c.SetCID(uint16(i + 300))
		h.io.SubmitAsync(c, make([]byte, 8192))
	}
	closed := make(chan struct{})
	go func() { h.io.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close with reads in the ring did not return")
	}
	if h.io.Queue.ring != nil || h.io.Queue.outstanding.Load() != 0 {
		t.Fatal("the ring outlived Close, or requests are still held")
	}
}

// A queue whose ring cannot be set up (out of memory, too many open
// files) runs its file I/O on the workers instead.
func TestRingSetupFailureFallsBack(t *testing.T) {
	setupRing = func(int, QueueTransport) (*queueRing, error) { return nil, errors.New("no ring for this test") }
	t.Cleanup(func() { setupRing = newQueueRing })
	h, _, _ := fileTarget(t, EngineIOURing, 1<<20)
	data := bytes.Repeat([]byte{9}, 4096)
	if st := h.rw(nvme.IOWrite, 1, 0, 8, data, false); st != 0 {
		t.Fatalf("write: %v", st)
	}
	got := make([]byte, 4096)
	if st := h.rw(nvme.IORead, 1, 0, 8, got, false); st != 0 || !bytes.Equal(got, data) {
		t.Fatalf("read: %v", st)
	}
	checkEngine(t, h, EngineThreads)
}

// The ring fills a read buffer the transport may have used before: a read
// cut short by the end of the file is resubmitted for the rest, and what
// lies past the end is zeroed, not left as the buffer's old contents.
func TestRingShortReadZeroesTheRest(t *testing.T) {
	tg, p, _ := testTarget(t)
	path := filepath.Join(t.TempDir(), "img")
	fb, err := backend.Open("file", backend.Options{Path: path, Size: 1 << 20, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fb.Close() })
	ns, _ := NewNamespace(2, fb, false, [16]byte{8})
	tg.Subsystem(testNQN).AddNamespace(ns)
	tg.SetIOEngine(EngineIOURing)
	q, tr := benchQueueOn(t, tg, p, testNQN)
	if err := os.WriteFile(path, bytes.Repeat([]byte{0x5a}, 6000), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Request{Cmd: ioCmd(nvme.IORead, 2, 0, 16, 8192), Rsp: make(nvme.Completion, nvme.CompletionSize)}
	if !q.Prepare(r) {
		t.Fatalf("prepare: %v", r.status)
	}
	r.Data = bytes.Repeat([]byte{0xff}, 8192)
	q.Execute(r)
	deadline := time.Now().Add(10 * time.Second)
	for tr.completed == 0 && time.Now().Before(deadline) {
		if q.Pending() {
			q.Reap()
		}
	}
	if tr.completed != 1 || r.status != 0 || q.ring == nil {
		t.Fatalf("completed %d, status %v, ring %v", tr.completed, r.status, q.ring != nil)
	}
	want := append(bytes.Repeat([]byte{0x5a}, 6000), make([]byte, 8192-6000)...)
	if !bytes.Equal(r.Data, want) {
		t.Fatal("a read across the end of the file is not the data, then zeros")
	}
}

// ringWithPipeRead is a queue whose ring holds one read in the kernel (on
// an empty pipe, so it stays there until the test writes) and one entry
// queued but not handed over; w is the pipe's write end and buf the
// read's buffer.
func ringWithPipeRead(t *testing.T) (q *Queue, w *os.File, buf []byte) {
	t.Helper()
	if err := uring.Probe(); err != nil {
		t.Fatalf("io_uring is needed for this test: %v", err)
	}
	tg, p, _ := testTarget(t)
	q = NewQueue(tg, p, 1, 4, stubTransport{})
	qr, err := newQueueRing(4, q.tr)
	if err != nil {
		t.Fatal(err)
	}
	q.ring = qr
	rd, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close(); w.Close() })
	buf = make([]byte, 8)
	take := func() uint32 {
		tag := qr.free[len(qr.free)-1]
		qr.free = qr.free[:len(qr.free)-1]
		cmd := newCmd(nvme.IORead)
		qr.slots[tag] = ringSlot{r: &Request{Cmd: cmd}}
		q.hold()
		return tag
	}
	if !qr.ring.PrepRead(int(rd.Fd()), buf, -1, uint64(take())) {
		t.Fatal("no room on the ring")
	}
	if err := qr.ring.Submit(); err != nil || qr.ring.Unsubmitted() != 0 {
		t.Fatalf("submit: %v, %d left", err, qr.ring.Unsubmitted())
	}
	if !qr.ring.PrepRead(int(rd.Fd()), make([]byte, 8), -1, uint64(take())) {
		t.Fatal("no room on the ring")
	}
	return q, w, buf
}

// If handing entries to the kernel fails at close, the entry the kernel
// never took is dropped, but the read it holds still writes into its
// buffer: closeRing waits for it before the buffers may go.
func TestCloseRingWaitsForTheKernelAfterAFailure(t *testing.T) {
	q, w, buf := ringWithPipeRead(t)
	calls := 0
	inKernel := -1
	ringSubmitAndWait = func(r *uring.Ring) error {
		calls++
		if calls == 1 {
			return errors.New("submission failed (test)")
		}
		if inKernel < 0 {
			inKernel = len(q.ring.slots) - len(q.ring.free)
			w.Write([]byte("complete")) // the read in the kernel finishes now
		}
		return r.SubmitAndWait()
	}
	t.Cleanup(func() { ringSubmitAndWait = (*uring.Ring).SubmitAndWait })
	q.closeRing()
	if inKernel != 1 {
		t.Fatalf("after the failure closeRing waited with %d requests held, want the 1 the kernel holds", inKernel)
	}
	if string(buf) != "complete" || q.outstanding.Load() != 0 {
		t.Fatalf("read %q, %d held; want the read done before close", buf, q.outstanding.Load())
	}
}
