package fabrics

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/backend/uring"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"golang.org/x/sys/unix"
)

// A queue's io_uring (EngineIOURing). Reads, writes and flushes of
// file-backed namespaces are queued on the ring by Execute, handed to the
// kernel once per poll pass (Reap), and completed by Reap from the ring's
// completion queue. The poller owns the ring: no locks. Each request in
// the ring holds one slot, whose index is the entry's tag, and has at most
// one entry queued at a time; the submission queue has a place for every
// slot, so queueing never fails for want of room.

// ringStep is what a request's next ring entry does.
type ringStep uint8

const (
	stepRead       ringStep = iota
	stepWrite               // a write the volatile cache may hold
	stepWriteDSync          // a durable write: RWF_DSYNC
	stepWriteSync           // a durable write where RWF_DSYNC is refused: fdatasync follows
	stepSync                // fdatasync: Flush, or after stepWriteSync
)

type ringSlot struct {
	r    *Request
	step ringStep
	done int // bytes transferred so far; short transfers resubmit the rest
}

type queueRing struct {
	ring  *uring.Ring
	slots []ringSlot
	free  []uint32 // free slot indexes, a stack
	own   *os.File // the ring's own eventfd, for a transport without one
}

// maxRingEntries bounds a ring whatever depth a queue claims.
const maxRingEntries = 4096

// setupRing is newQueueRing; tests stand in a failing set-up.
var setupRing = newQueueRing

// newQueueRing sets up a ring for depth requests whose completions wake
// the poller of tr.
func newQueueRing(depth int, tr QueueTransport) (*queueRing, error) {
	entries := uint32(1)
	for int(entries) < depth && entries < maxRingEntries {
		entries <<= 1
	}
	ring, err := uring.New(entries)
	if err != nil {
		return nil, err
	}
	qr := &queueRing{ring: ring}
	n := min(depth, int(ring.Entries()))
	qr.slots, qr.free = make([]ringSlot, n), make([]uint32, n)
	for i := range qr.free {
		qr.free[i] = uint32(n - 1 - i)
	}
	if err := qr.signal(tr); err != nil {
		qr.close()
		return nil, err
	}
	return qr, nil
}

// signal registers the eventfd that completions write: the transport's own
// where it has one, so a sleeping poller wakes with no goroutine between.
func (qr *queueRing) signal(tr QueueTransport) error {
	if e, ok := tr.(EventFDer); ok && e.EventFD() >= 0 {
		return qr.ring.RegisterEventFD(e.EventFD())
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	qr.own = os.NewFile(uintptr(efd), "io_uring completions")
	if err := qr.ring.RegisterEventFD(efd); err != nil {
		return err
	}
	go func(f *os.File) {
		var b [8]byte
		for {
			if _, err := f.Read(b[:]); err != nil {
				return // closed with the ring
			}
			tr.Wake()
		}
	}(qr.own)
	return nil
}

func (qr *queueRing) close() {
	qr.ring.Close()
	if qr.own != nil {
		qr.own.Close()
	}
}

// pending reports whether Reap has ring work: entries to submit or
// completions to take.
func (qr *queueRing) pending() bool { return qr.ring.Unsubmitted() != 0 || qr.ring.Ready() }

// prep queues slot tag's next entry.
func (qr *queueRing) prep(tag uint32) bool {
	s := &qr.slots[tag]
	r := s.r
	fd := r.ns.file.Fd()
	switch s.step {
	case stepRead:
		return qr.ring.PrepRead(fd, r.Data[s.done:], r.off+int64(s.done), uint64(tag))
	case stepWrite, stepWriteSync:
		return qr.ring.PrepWrite(fd, r.Data[s.done:], r.off+int64(s.done), 0, uint64(tag))
	case stepWriteDSync:
		return qr.ring.PrepWrite(fd, r.Data[s.done:], r.off+int64(s.done), unix.RWF_DSYNC, uint64(tag))
	}
	return qr.ring.PrepFdatasync(fd, uint64(tag))
}

// ringStepOf is the first ring step of r, or false if r is not for the
// ring: only plain reads, writes and flushes of a file-backed namespace.
// A write keeps the durability execWrite gives it (see writeData).
func ringStepOf(r *Request) (ringStep, bool) {
	if r.ns == nil || r.ns.file == nil || r.also != nil || r.Cmd.Fuse() != 0 {
		return 0, false
	}
	switch r.Cmd.Opcode() {
	case nvme.IORead:
		return stepRead, true
	case nvme.IOFlush:
		return stepSync, true
	case nvme.IOWrite:
		switch {
		case !r.ns.file.Writable():
			return 0, false // the backend's own error (ErrReadOnly)
		case !r.durable():
			return stepWrite, true
		}
		if _, ok := r.ns.Backend.(backend.SyncWriter); ok {
			return stepWriteDSync, true
		}
		return stepWriteSync, true
	}
	return 0, false
}

// ringFor is the queue's ring, set up on the first I/O that can use it;
// nil when the engine is threads or the set-up failed.
func (q *Queue) ringFor() *queueRing {
	if q.ring != nil || q.ringOff {
		return q.ring
	}
	q.ringOff = true
	if q.target.IOEngine() != EngineIOURing {
		return nil
	}
	qr, err := setupRing(q.depth, q.tr)
	if err != nil {
		q.log.WithError(err).Warn("cannot set up io_uring for this queue; its file and block I/O runs on worker threads")
		return nil
	}
	q.ring, q.ringOff = qr, false
	return qr
}

// submitRing queues r on the ring and reports true, or reports false for
// a worker to run it.
func (q *Queue) submitRing(r *Request) bool {
	step, ok := ringStepOf(r)
	if !ok {
		return false
	}
	qr := q.ringFor()
	if qr == nil || len(qr.free) == 0 {
		return false
	}
	if r.Cmd.Opcode() == nvme.IOWrite && !r.ns.tryEnterWrite(r) {
		return false
	}
	tag := qr.free[len(qr.free)-1]
	qr.free = qr.free[:len(qr.free)-1]
	qr.slots[tag] = ringSlot{r: r, step: step}
	q.hold()
	if !qr.prep(tag) {
		// Not expected (the queue has a place for every slot), but a
		// worker can still run it.
		q.releaseSlot(tag)
		return false
	}
	if qr.ring.Unsubmitted() == 1 {
		// A transport whose poller does not look at Pending after
		// Execute (the loop) submits on the wake.
		q.tr.Wake()
	}
	return true
}

// reapRing submits what Execute queued, completes what the kernel
// finished, and submits the follow-ups (the rest of a short transfer, the
// fdatasync after a write).
func (q *Queue) reapRing() {
	qr := q.ring
	if err := qr.ring.Submit(); err != nil {
		q.ringFailed(err)
		return
	}
	for {
		tag, res, ok := qr.ring.Peek()
		if !ok {
			break
		}
		qr.ring.Advance()
		q.ringCompleted(uint32(tag), res)
	}
	if err := qr.ring.Submit(); err != nil {
		q.ringFailed(err)
	}
}

// ringFailed handles a ring the kernel no longer takes entries from: the
// queued requests cannot complete, so the host must reconnect.
func (q *Queue) ringFailed(err error) {
	q.log.WithError(err).Error("io_uring submission failed; disconnecting the queue")
	q.tr.Disconnect()
}

// ringCompleted advances slot tag's request by one completion: on to its
// next entry, or to the host.
func (q *Queue) ringCompleted(tag uint32, res int32) {
	qr := q.ring
	s := &qr.slots[tag]
	write := s.step != stepRead
	switch {
	case res == -int32(unix.EINTR):
		// As the backend's own loops do: try again.
	case s.step == stepWriteDSync && (res == -int32(unix.EOPNOTSUPP) || res == -int32(unix.ENOSYS)):
		// As WriteAtSync does where the file system refuses the flag.
		s.step = stepWriteSync
	case res < 0:
		q.finishRing(tag, ioStatus(uring.Errno(res), write))
		return
	case s.step == stepSync:
		q.finishRing(tag, 0)
		return
	case res == 0 && write:
		q.finishRing(tag, ioStatus(io.ErrShortWrite, true))
		return
	case res == 0:
		// Past the end of a file shorter than the namespace: zeros.
		clear(s.r.Data[s.done:])
		s.done = len(s.r.Data)
	default:
		s.done += int(res)
	}
	if s.done == len(s.r.Data) && s.step != stepSync {
		if s.step != stepWriteSync {
			q.finishRing(tag, 0)
			return
		}
		s.step = stepSync
	}
	qr.prep(tag)
}

// finishRing completes slot tag's request with st and frees the slot.
func (q *Queue) finishRing(tag uint32, st nvme.Status) {
	r := q.ring.slots[tag].r
	q.releaseSlot(tag)
	r.status = st
	q.complete(r)
}

// releaseSlot ends what submitRing began: the write's admission, the
// queue's hold and the slot. The request keeps its claim on the namespace
// (complete ends it).
func (q *Queue) releaseSlot(tag uint32) {
	qr := q.ring
	r := qr.slots[tag].r
	if r.Cmd.Opcode() == nvme.IOWrite {
		r.ns.exitWrite(r, r.off, r.length, false)
	}
	qr.slots[tag] = ringSlot{}
	qr.free = append(qr.free, tag)
	q.unhold()
}

// closeRing waits for every operation in the kernel, so that the
// transport may free their buffers, and closes the ring. Their requests
// are not completed: the queue is going away. If handing entries to the
// kernel fails, those it did not take are dropped (they never run), but
// the ones it took still write into their buffers: closeRing waits for
// them all the same.
func (q *Queue) closeRing() {
	qr := q.ring
	if qr == nil {
		return
	}
	failed := false
	for len(qr.free) < len(qr.slots) {
		if err := ringSubmitAndWait(qr.ring); err != nil {
			if !failed {
				q.log.WithError(err).Error("io_uring failed at close; waiting for the operations it holds before their buffers go")
				failed = true
			}
			qr.ring.Unqueue(func(tag uint64) { q.dropSlot(uint32(tag)) })
			if len(qr.free) < len(qr.slots) {
				time.Sleep(ringRetry) // a failing wait must not spin
			}
		}
		for {
			tag, _, ok := qr.ring.Peek()
			if !ok {
				break
			}
			qr.ring.Advance()
			q.dropSlot(uint32(tag))
		}
	}
	qr.close()
	q.ring = nil
}

// ringSubmitAndWait is the ring's SubmitAndWait; tests make it fail.
var ringSubmitAndWait = (*uring.Ring).SubmitAndWait

// ringRetry is how long closeRing backs off after a failed wait.
const ringRetry = 10 * time.Millisecond

// dropSlot releases slot tag and its request's namespace claim without
// completing it, at close.
func (q *Queue) dropSlot(tag uint32) {
	r := q.ring.slots[tag].r
	q.releaseSlot(tag)
	r.release()
}
