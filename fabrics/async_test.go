package fabrics

import (
	"bytes"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// asyncMem is a memBackend with asynchronous reads, writes and flushes,
// completed from goroutines of its own once hold is closed (nil: at once).
type asyncMem struct {
	*memBackend
	mu       sync.Mutex
	started  int
	inFlight chan int // receives started after each start
	hold     chan struct{}
	fail     int64 // when set, the next completion's result
	startErr error // when set, the next start's error
}

func (a *asyncMem) Traits() backend.Traits { return backend.Traits{} }

func (a *asyncMem) start(sink *backend.AsyncSink, tag uint32, op func() int64) error {
	a.mu.Lock()
	if err := a.startErr; err != nil {
		a.startErr = nil
		a.mu.Unlock()
		return err
	}
	a.started++
	n, hold, fail := a.started, a.hold, a.fail
	a.fail = 0
	a.mu.Unlock()
	if a.inFlight != nil {
		a.inFlight <- n
	}
	go func() {
		if hold != nil {
			<-hold
		}
		res := op()
		if fail != 0 {
			res = fail
		}
		sink.Done(tag, res)
	}()
	return nil
}

func (a *asyncMem) ReadAsync(p []byte, off int64, sink *backend.AsyncSink, tag uint32) error {
	return a.start(sink, tag, func() int64 { a.ReadAt(p, off); return int64(len(p)) })
}
func (a *asyncMem) WriteAsync(p []byte, off int64, sink *backend.AsyncSink, tag uint32) error {
	return a.start(sink, tag, func() int64 { a.WriteAt(p, off); return int64(len(p)) })
}
func (a *asyncMem) FlushAsync(sink *backend.AsyncSink, tag uint32) error {
	return a.start(sink, tag, func() int64 { a.Flush(); return 0 })
}

var _ backend.AsyncIO = (*asyncMem)(nil)

// A queue keeps more asynchronous I/Os in flight than it has workers, and
// each completes with its own data.
func TestAsyncBackendDepth(t *testing.T) {
	const n = 3 * workersPerQueue
	a := &asyncMem{memBackend: newMem(1<<20, 512), inFlight: make(chan int, n), hold: make(chan struct{})}
	tg, p := targetWith(t, a)
	h := connect(t, tg, p, testNQN)
	var rsps []<-chan nvme.Completion
	for i := range n {
		data := bytes.Repeat([]byte{byte(i + 1)}, 4096)
		c := ioCmd(nvme.IOWrite, 1, uint64(i*8), 8, len(data))
		c.SetCID(uint16(100 + i))
		rsps = append(rsps, h.io.SubmitAsync(c, data))
	}
	for want := 1; want <= n; want++ {
		select {
		case got := <-a.inFlight:
			if got != want {
				t.Fatalf("start %d reported as %d", want, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d writes started without waiting for a completion", want-1, n)
		}
	}
	close(a.hold)
	for i, ch := range rsps {
		if rsp, ok := <-ch; !ok || rsp.Status() != 0 {
			t.Fatalf("write %d: %v (delivered %v)", i, rsp.Status(), ok)
		}
	}
	for i := range n {
		got := make([]byte, 4096)
		if st := h.rw(nvme.IORead, 1, uint64(i*8), 8, got, false); st != 0 {
			t.Fatalf("read %d: %v", i, st)
		}
		<-a.inFlight
		if !bytes.Equal(got, bytes.Repeat([]byte{byte(i + 1)}, 4096)) {
			t.Fatalf("read %d: wrong data %d...", i, got[0])
		}
	}
	if st := h.submit(h.io, ioCmd(nvme.IOFlush, 1, 0, 1, 0), nil).Status(); st != 0 {
		t.Fatalf("flush: %v", st)
	}
	<-a.inFlight
	if a.flushes != 1 {
		t.Fatalf("backend saw %d flushes, want 1 through FlushAsync", a.flushes)
	}
}

// A failed completion maps like a failed call (a timeout is retryable); an
// operation that does not start completes at once with its error.
func TestAsyncBackendErrors(t *testing.T) {
	a := &asyncMem{memBackend: newMem(1<<20, 512)}
	tg, p := targetWith(t, a)
	h := connect(t, tg, p, testNQN)
	buf := make([]byte, 512)
	a.fail = -int64(syscall.ETIMEDOUT)
	if st := h.rw(nvme.IOWrite, 1, 0, 1, buf, false); st != nvme.StatusNamespaceNotReady {
		t.Fatalf("write timing out: %v, want Namespace Not Ready (retryable)", st)
	}
	a.startErr = syscall.EIO
	if st := h.rw(nvme.IORead, 1, 0, 1, buf, false); st != nvme.StatusReadError {
		t.Fatalf("read failing to start: %v, want Unrecovered Read Error", st)
	}
	if st := h.rw(nvme.IORead, 1, 0, 1, buf, false); st != 0 {
		t.Fatalf("read after the errors: %v", st)
	}
}
