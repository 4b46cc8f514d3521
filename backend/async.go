package backend

import (
	"errors"
	"sync"
	"sync/atomic"
)

// AsyncIO is implemented by backends that start an I/O and return at once,
// completing it later from a thread of their own (librbd's asynchronous
// calls). A queue then keeps its whole depth in flight, instead of one
// call per worker goroutine.
//
// Each call returns an error if the operation did not start (then no
// completion follows); otherwise sink's Done is called exactly once with
// tag and the result: the bytes transferred (a read may end short past the
// end of the backend; the rest of p is the caller's to zero) or a negative
// errno. p must stay valid until then.
type AsyncIO interface {
	ReadAsync(p []byte, off int64, sink *AsyncSink, tag uint32) error
	WriteAsync(p []byte, off int64, sink *AsyncSink, tag uint32) error
	FlushAsync(sink *AsyncSink, tag uint32) error
}

// AsyncSink receives the completions of asynchronous calls. Backends name
// it to their C libraries by ID, a small number, since C may not hold Go
// pointers.
type AsyncSink struct {
	// Done runs on a backend thread, once per started operation.
	Done func(tag uint32, res int64)
	id   uint32
}

// maxAsyncSinks bounds the sinks open at once: one per I/O queue that has
// used an asynchronous backend, at most limits.max_queue_pairs.
const maxAsyncSinks = 1 << 16

var asyncSinks struct {
	mu   sync.Mutex
	byID [maxAsyncSinks]atomic.Pointer[AsyncSink]
	next uint32   // IDs below it were handed out at least once
	free []uint32 // IDs closed since, for reuse
}

// ErrTooManySinks is returned by NewAsyncSink when every ID is in use.
var ErrTooManySinks = errors.New("too many asynchronous completion sinks open")

// NewAsyncSink registers done. Close it once every operation started on
// it has completed.
func NewAsyncSink(done func(tag uint32, res int64)) (*AsyncSink, error) {
	s := &asyncSinks
	s.mu.Lock()
	defer s.mu.Unlock()
	var id uint32
	switch {
	case len(s.free) > 0:
		id = s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
	case s.next < maxAsyncSinks:
		id = s.next
		s.next++
	default:
		return nil, ErrTooManySinks
	}
	sink := &AsyncSink{Done: done, id: id}
	s.byID[id].Store(sink)
	return sink, nil
}

// Close unregisters the sink; its ID may name another sink from then on.
func (sink *AsyncSink) Close() {
	s := &asyncSinks
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID[sink.id].CompareAndSwap(sink, nil) {
		s.free = append(s.free, sink.id)
	}
}

// asyncArg packs a sink and a tag into the one word a C callback carries.
func asyncArg(sink *AsyncSink, tag uint32) uint64 { return uint64(sink.id)<<32 | uint64(tag) }

// completeAsync delivers the result of the operation arg names.
func completeAsync(arg uint64, res int64) {
	if sink := asyncSinks.byID[arg>>32%maxAsyncSinks].Load(); sink != nil {
		sink.Done(uint32(arg), res)
	}
}
