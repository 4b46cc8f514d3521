package fabrics

import (
	"errors"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// LoopQueue is an in-memory transport for one queue pair: the host is the
// caller, in the same process. It exercises the same Prepare / Execute /
// Complete / Reap path as the RDMA transport, so tests of commands,
// controllers and hostile input need no RDMA. Keyed SGLs address the data
// slice passed to Submit; offset SGLs carry it in-capsule.
type LoopQueue struct {
	Queue *Queue

	// mu plays the poller: Prepare, Execute, Reap and Complete run under it.
	mu      sync.Mutex
	waiters map[*Request]chan struct{}
	wake    chan struct{}
	gone    chan struct{}
	once    sync.Once
}

// NewLoopQueue accepts a queue pair on port with the host's queue ID and
// depth, as the RDMA listener does on a connection request.
func NewLoopQueue(t *Target, p *Port, qid uint16, depth int) *LoopQueue {
	lq := &LoopQueue{
		waiters: map[*Request]chan struct{}{},
		wake:    make(chan struct{}, 1),
		gone:    make(chan struct{}),
	}
	lq.Queue = NewQueue(t, p, qid, depth, lq)
	go lq.poll()
	return lq
}

func (lq *LoopQueue) poll() {
	for {
		select {
		case <-lq.wake:
			lq.mu.Lock()
			lq.Queue.Reap()
			lq.mu.Unlock()
		case <-lq.gone:
			return
		}
	}
}

// ErrDisconnected is returned by Submit once the target tore the queue down.
var ErrDisconnected = errors.New("loop queue disconnected")

// Complete implements QueueTransport. It runs with lq.mu held.
func (lq *LoopQueue) Complete(r *Request) {
	if ch := lq.waiters[r]; ch != nil {
		delete(lq.waiters, r)
		ch <- struct{}{}
	}
}

// Wake implements QueueTransport.
func (lq *LoopQueue) Wake() {
	select {
	case lq.wake <- struct{}{}:
	default:
	}
}

// Disconnect implements QueueTransport.
func (lq *LoopQueue) Disconnect() { lq.once.Do(func() { close(lq.gone) }) }

// Peer implements QueueTransport.
func (lq *LoopQueue) Peer() string { return "loop" }

// Disconnected reports whether the target tore the queue down.
func (lq *LoopQueue) Disconnected() bool {
	select {
	case <-lq.gone:
		return true
	default:
		return false
	}
}

// Submit sends one command capsule and waits for its response. For
// host-to-controller commands data is the payload; for controller-to-host
// commands the response data is copied into it. cmd must be 64 bytes.
func (lq *LoopQueue) Submit(cmd nvme.Command, data []byte) (nvme.Completion, error) {
	return lq.submit(cmd, data)
}

// SubmitAsync is Submit for commands the target may hold (Async Event
// Request): it returns a channel that yields the response.
func (lq *LoopQueue) SubmitAsync(cmd nvme.Command, data []byte) <-chan nvme.Completion {
	out := make(chan nvme.Completion, 1)
	go func() {
		c, err := lq.submit(cmd, data)
		if err == nil {
			out <- c
		}
		close(out)
	}()
	return out
}

func (lq *LoopQueue) submit(cmd nvme.Command, data []byte) (nvme.Completion, error) {
	if lq.Disconnected() {
		return nil, ErrDisconnected
	}
	r := &Request{
		Cmd: append(nvme.Command(nil), cmd[:nvme.CommandSize]...),
		Rsp: make(nvme.Completion, nvme.CompletionSize),
	}
	done := make(chan struct{}, 1)
	lq.mu.Lock()
	lq.waiters[r] = done
	if lq.Queue.Prepare(r) {
		lq.mapData(r, data)
	}
	lq.mu.Unlock()
	select {
	case <-done:
	case <-lq.gone:
		return nil, ErrDisconnected
	}
	if r.Dir == DirCtrlToHost && r.status == 0 {
		copy(data, r.Data)
	}
	return r.Rsp, nil
}

func (lq *LoopQueue) mapData(r *Request, data []byte) {
	sgl := r.Cmd.SGL()
	switch sgl.ID() {
	case nvme.SGLDataBlockOffset:
		if r.Len > 0 {
			if st := r.MapInline(data); st != 0 {
				lq.Queue.Fail(r, st)
				return
			}
		}
	case nvme.SGLKeyed, nvme.SGLKeyedInvalidate:
		if r.Len > 0 {
			if st := r.CheckKeyedLength(sgl.KeyedLength()); st != 0 {
				lq.Queue.Fail(r, st)
				return
			}
			r.Data = make([]byte, r.Len)
			if r.Dir == DirHostToCtrl {
				copy(r.Data, data)
			}
		}
	default:
		lq.Queue.Fail(r, nvme.StatusSGLInvalidType|nvme.DNR)
		return
	}
	lq.Queue.Execute(r)
}

// Close tears the queue down as the transport would.
func (lq *LoopQueue) Close() {
	lq.Disconnect()
	lq.Queue.Close()
}
