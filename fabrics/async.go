package fabrics

import (
	"sync/atomic"
	"syscall"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A queue's asynchronous I/O. Reads, writes and flushes of namespaces
// whose backend starts I/O without waiting for it (backend.AsyncIO: rbd)
// are started from the poller, so the host's whole queue depth is in
// flight, and complete on the backend's own thread, which hands them back
// to the poller as a worker does. Each holds a slot, whose index is the
// tag the backend reports back; the poller owns the free list.

type queueAsync struct {
	q     *Queue
	sink  *backend.AsyncSink
	slots []atomic.Pointer[Request] // written by the poller, read by the backend's thread
	free  []uint32
}

// asyncFor is the queue's asynchronous I/O, set up on first use; nil if
// that failed (the workers run the I/O then).
func (q *Queue) asyncFor() *queueAsync {
	if q.async != nil || q.asyncOff {
		return q.async
	}
	qa := &queueAsync{q: q, slots: make([]atomic.Pointer[Request], q.depth), free: make([]uint32, q.depth)}
	for i := range qa.free {
		qa.free[i] = uint32(q.depth - 1 - i)
	}
	sink, err := backend.NewAsyncSink(qa.done)
	if err != nil {
		q.asyncOff = true
		q.log.WithError(err).Warn("cannot take asynchronous completions on this queue; its rbd I/O runs on worker threads")
		return nil
	}
	qa.sink, q.async = sink, qa
	return qa
}

// asyncOf reports whether r may go asynchronous: a plain read, a write
// the backend may cache as it does any, or a flush, of a namespace with an
// asynchronous backend that takes writes.
func asyncOf(r *Request) (backend.AsyncIO, bool) {
	ns := r.ns
	if ns == nil || ns.async == nil || r.also != nil || r.Cmd.Fuse() != 0 {
		return nil, false
	}
	switch r.Cmd.Opcode() {
	case nvme.IORead:
		return ns.async, true
	case nvme.IOWrite:
		return ns.async, !ns.ReadOnly && !r.durable()
	case nvme.IOFlush:
		return ns.async, !ns.ReadOnly
	}
	return nil, false
}

// submitAsync starts r on its backend and reports true, or reports false
// for a worker to run it.
func (q *Queue) submitAsync(r *Request) bool {
	a, ok := asyncOf(r)
	if !ok {
		return false
	}
	qa := q.asyncFor()
	if qa == nil || len(qa.free) == 0 {
		return false
	}
	op := r.Cmd.Opcode()
	if op == nvme.IOWrite && !r.ns.tryEnterWrite(r) {
		return false
	}
	tag := qa.free[len(qa.free)-1]
	qa.free = qa.free[:len(qa.free)-1]
	r.asyncSlot = tag + 1
	qa.slots[tag].Store(r)
	q.hold()
	var err error
	switch op {
	case nvme.IORead:
		err = a.ReadAsync(r.Data, r.off, qa.sink, tag)
	case nvme.IOWrite:
		err = a.WriteAsync(r.Data, r.off, qa.sink, tag)
	default:
		err = a.FlushAsync(qa.sink, tag)
	}
	if err != nil {
		// Not started: no completion will come.
		qa.release(r)
		if op == nvme.IOWrite {
			r.ns.exitWrite(r, r.off, r.length, false)
		}
		q.unhold()
		r.status = r.backendStatus(err, op != nvme.IORead)
		q.complete(r)
	}
	return true
}

// done completes the operation in slot tag, on the backend's thread: res
// is the bytes transferred or a negative errno.
func (qa *queueAsync) done(tag uint32, res int64) {
	r := qa.slots[tag].Load()
	op := r.Cmd.Opcode()
	switch {
	case res < 0:
		r.status = r.backendStatus(syscall.Errno(-res), op != nvme.IORead)
	case op == nvme.IORead && res < int64(len(r.Data)):
		// Past the end of an image that shrank under the namespace.
		clear(r.Data[res:])
	}
	if op == nvme.IOWrite {
		r.ns.exitWrite(r, r.off, r.length, false)
	}
	r.release() // before the poller may see it: removal waits for this
	qa.q.completeAsync(r)
}

// release frees r's slot, on the poller.
func (qa *queueAsync) release(r *Request) {
	tag := r.asyncSlot - 1
	r.asyncSlot = 0
	qa.slots[tag].Store(nil)
	qa.free = append(qa.free, tag)
}

// closeAsync unregisters the queue's sink, once no operation is in flight.
func (q *Queue) closeAsync() {
	if q.async != nil {
		q.async.sink.Close()
		q.async = nil
	}
}
