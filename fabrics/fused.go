package fabrics

import (
	"bytes"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Fused Compare and Write: a Compare marked FUSE=first immediately
// followed, on the same queue, by a Write marked FUSE=second over the same
// blocks. The write happens only if the compare matches. Pairs on one
// namespace run one at a time (Namespace.fuseMu), which makes them atomic
// with respect to each other: the compare-and-swap hosts build locks from.
// Plain writes to the same blocks are not held back.

// prepareFused validates fused commands and pairs them up. It also fails
// a waiting first command whose second never came.
func (q *Queue) prepareFused(r *Request) nvme.Status {
	first := q.fuseFirst
	fuse := r.Cmd.Fuse()
	if first != nil && fuse != nvme.FuseSecond {
		// The first command's partner is missing: it fails, and this
		// command is taken on its own.
		q.fuseFirst = nil
		q.abortFirst(first)
		if fuse == 0 {
			return q.prepareUnfused(r)
		}
	}
	if q.QID == 0 || q.ctrl == nil {
		return nvme.StatusInvalidField | nvme.DNR
	}
	switch fuse {
	case nvme.FuseFirst:
		if r.Cmd.Opcode() != nvme.IOCompare {
			return nvme.StatusInvalidField | nvme.DNR
		}
		if st := q.prepareIO(r); st != 0 {
			return st
		}
		r.handler = execFusedFirst
		q.fuseFirst = r
		q.outstanding.Add(1) // held until its second completes it
	case nvme.FuseSecond:
		if first == nil {
			return nvme.StatusFusedMissing | nvme.DNR
		}
		q.fuseFirst = nil
		if r.Cmd.Opcode() != nvme.IOWrite || r.Cmd.NSID() != first.Cmd.NSID() ||
			r.Cmd.SLBA() != first.Cmd.SLBA() || r.Cmd.NLB() != first.Cmd.NLB() {
			q.abortFirst(first)
			return nvme.StatusInvalidField | nvme.DNR
		}
		if st := q.prepareIO(r); st != 0 {
			q.abortFirst(first)
			return st
		}
		r.pair = first
		r.handler = execFusedWrite
	default:
		return nvme.StatusInvalidField | nvme.DNR
	}
	return 0
}

// prepareUnfused is Prepare's dispatch for an ordinary command.
func (q *Queue) prepareUnfused(r *Request) nvme.Status {
	switch {
	case r.Cmd.Opcode() == nvme.OpFabrics:
		return q.prepareFabrics(r)
	case q.ctrl == nil:
		return nvme.StatusCommandSequence | nvme.DNR
	case q.QID == 0:
		return q.prepareAdmin(r)
	}
	return q.prepareIO(r)
}

// abortFirst fails a first fused command whose second is missing or bad.
// If its data is still on the way it fails when it executes.
func (q *Queue) abortFirst(first *Request) {
	if !first.fuseReady {
		first.fuseAbort = true
		return
	}
	first.status = nvme.StatusFusedMissing
	q.outstanding.Add(-1)
	q.complete(first)
}

// execFusedFirst holds the compare until its write arrives.
func execFusedFirst(q *Queue, r *Request) bool {
	r.fuseReady = true
	if r.fuseAbort {
		q.outstanding.Add(-1)
		r.status = nvme.StatusFusedMissing
		return true
	}
	return false
}

// execFusedWrite runs the pair: compare, then write if it matched. The
// first command completes with the second.
func execFusedWrite(q *Queue, r *Request) bool {
	first := r.pair
	r.also = first
	if !first.fuseReady {
		// The transport executes in arrival order; this cannot happen
		// with a correct one.
		first.status = nvme.StatusInternal
		r.status = nvme.StatusFusedFail
		return true
	}
	ns := r.ns
	ns.fuseMu.Lock()
	defer ns.fuseMu.Unlock()
	bp := compareBufs.Get().(*[]byte)
	defer compareBufs.Put(bp)
	cur := (*bp)[:len(first.Data)]
	if err := ns.Backend.ReadAt(cur, first.off); err != nil {
		first.status = nvme.StatusReadError
		r.status = nvme.StatusFusedFail
		return true
	}
	if !bytes.Equal(cur, first.Data) {
		first.status = nvme.StatusCompareFailed
		r.status = nvme.StatusFusedFail
		return true
	}
	return execWrite(q, r)
}
