package fabrics

import (
	"bytes"
	"errors"
	"sync"
	"syscall"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// prepareIO dispatches an I/O command through ioCommands: the namespace
// it needs is claimed, its range checked and its transfer sized.
func (q *Queue) prepareIO(r *Request) nvme.Status {
	if !q.ctrl.Ready() {
		return nvme.StatusCommandSequence | nvme.DNR
	}
	c := &ioCommands[r.Cmd.Opcode()]
	if !c.supported() {
		return nvme.StatusInvalidOpcode | nvme.DNR
	}
	nsid := r.Cmd.NSID()
	if nsid == nvme.NSIDBroadcast && c.broadcast != nil {
		// Each namespace's call can take long: off the poller, as any
		// other backend call.
		r.handler, r.blocking = c.broadcast, true
		return 0
	}
	if !c.needsNS {
		return c.use(q, r)
	}
	ns := q.ctrl.Subsystem.Namespace(nsid)
	if ns == nil || !q.ctrl.sees(nsid) {
		return nvme.StatusInvalidNamespace | nvme.DNR
	}
	// Counted in flight before the ANA check, as claim does for removal:
	// a group turned inaccessible either refuses this command here or
	// has a drain (QuiesceANAGroup) that waits for it.
	if st := q.claim(r, ns, c.access == accessWrite); st != 0 {
		return st
	}
	if claimedHook != nil {
		claimedHook(r)
	}
	if st := q.anaStatus(ns); st != 0 {
		return st
	}
	r.blocking = ns.blocking
	if st := c.use(q, r); st != 0 {
		return st
	}
	if c.writes && ns.ReadOnly {
		return nvme.StatusNamespaceWriteProt | nvme.DNR
	}
	if c.resv {
		return prepareResv(r, ns)
	}
	return q.resvCheck(r, ns, c.access == accessWrite)
}

// ioStatus maps a backend error to the status the host should see, as
// the Linux target does for block errors: a full file system is Capacity
// Exceeded, a read-only one Write Protected, a transient shortage a
// retryable Internal Error, storage that cannot be reached for now (a
// network backend timing out or disconnected: an RBD image whose OSDs are
// down) a retryable Namespace Not Ready, and an I/O error the media status
// of the direction (Write Fault, Unrecovered Read Error), which the host
// may retry. In a gateway group the unreachable cases are path errors
// instead (Request.backendStatus).
func ioStatus(err error, write bool) nvme.Status {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return nvme.StatusCapacityExceeded | nvme.DNR
	case errors.Is(err, backend.ErrReadOnly), errors.Is(err, syscall.EROFS):
		return nvme.StatusNamespaceWriteProt | nvme.DNR
	case errors.Is(err, syscall.ENOMEM), errors.Is(err, syscall.EAGAIN):
		return nvme.StatusInternal
	case errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.ENOTCONN), errors.Is(err, syscall.ESHUTDOWN),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH):
		return nvme.StatusNamespaceNotReady
	case write:
		return nvme.StatusWriteFault
	}
	return nvme.StatusReadError
}

// durable reports whether r's write must reach stable media before it
// completes: the host set FUA, or turned the volatile write cache off (or
// was never offered one), and the namespace has a cache to get past.
func (r *Request) durable() bool {
	if !r.ns.traits.VolatileCache {
		return false
	}
	return r.Cmd.FUA() || r.q.ctrl.writeThrough.Load()
}

func execRead(q *Queue, r *Request) bool {
	r.status = r.backendStatus(r.ns.Backend.ReadAt(r.Data, r.off), false)
	return true
}

// execWrite writes the host's data, after any fused Compare and Write on
// the same blocks (see writeGate).
func execWrite(q *Queue, r *Request) bool {
	gated := r.ns.enterWrite(r, r.off, r.length)
	writeData(r)
	r.ns.exitWrite(r, r.off, r.length, gated)
	return true
}

// writeData is the backend call of a write.
func writeData(r *Request) {
	var err error
	if r.durable() {
		err = backend.WriteDurable(r.ns.Backend, r.Data, r.off)
	} else {
		err = r.ns.Backend.WriteAt(r.Data, r.off)
	}
	r.status = r.backendStatus(err, true)
}

// compareBufs holds scratch buffers for Compare; Go allocates buffers this
// large on page boundaries, as O_DIRECT backends need.
var compareBufs = sync.Pool{New: func() any { b := make([]byte, MaxDataTransfer); return &b }}

// execCompare reads the range and compares it with the host's data.
func execCompare(q *Queue, r *Request) bool {
	bp := compareBufs.Get().(*[]byte)
	defer compareBufs.Put(bp)
	cur := (*bp)[:len(r.Data)]
	if err := r.ns.Backend.ReadAt(cur, r.off); err != nil {
		r.status = r.backendStatus(err, false)
		return true
	}
	if !bytes.Equal(cur, r.Data) {
		r.status = nvme.StatusCompareFailed
	}
	return true
}

func execFlush(q *Queue, r *Request) bool {
	r.status = r.backendStatus(r.ns.Backend.Flush(), true)
	return true
}

// execFlushAll flushes every namespace the controller sees (Flush with
// the broadcast NSID), each held so that a removal cannot close it meanwhile.
func execFlushAll(q *Queue, r *Request) bool {
	r.status = ioStatus(q.ctrl.flushNamespaces(), true)
	return true
}

// execWriteZeroes zeroes the blocks. Deallocate (DEAC) lets a backend
// punch a hole instead, but only one whose holes read back as zeros: a
// block device's discard may leave old data, so it always zeroes.
func execWriteZeroes(q *Queue, r *Request) bool {
	ns := r.ns
	gated := ns.enterWrite(r, r.off, r.length)
	defer ns.exitWrite(r, r.off, r.length, gated)
	var err error
	d, canDiscard := ns.Backend.(backend.Discarder)
	z, canZero := ns.Backend.(backend.Zeroer)
	switch {
	case r.Cmd.DEAC() && canDiscard && ns.traits.DiscardZeroes:
		err = d.Discard(r.off, r.length)
	case canZero:
		err = z.WriteZeroes(r.off, r.length)
	default:
		r.status = nvme.StatusInvalidOpcode | nvme.DNR
		return true
	}
	if err == nil && r.durable() {
		err = ns.Backend.Flush()
	}
	r.status = r.backendStatus(err, true)
	return true
}

func execDSM(q *Queue, r *Request) bool {
	ns := r.ns
	if !r.Cmd.DSMDeallocate() {
		return true // hints only: nothing to do
	}
	d, ok := ns.Backend.(backend.Discarder)
	if !ok {
		return true // deallocation is advisory
	}
	// The ranges are many and scattered: a fused pair waits for all.
	gated := ns.enterWrite(r, 0, wholeNamespace)
	defer ns.exitWrite(r, 0, wholeNamespace, gated)
	for i := 0; i+nvme.DSMRangeSize <= len(r.Data); i += nvme.DSMRangeSize {
		rng := nvme.DSMRange(r.Data[i : i+nvme.DSMRangeSize])
		nlb, slba := uint64(rng.NLB()), rng.SLBA()
		if blocks := ns.Blocks(); slba >= blocks || nlb > blocks-slba {
			r.status = nvme.StatusLBARange | nvme.DNR
			return true
		}
		if nlb == 0 {
			continue
		}
		if err := d.Discard(int64(slba<<ns.BlockShift), int64(nlb<<ns.BlockShift)); err != nil {
			r.status = r.backendStatus(err, true)
			return true
		}
	}
	return true
}
