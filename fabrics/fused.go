package fabrics

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Fused Compare and Write: a Compare marked FUSE=first immediately
// followed, on the same queue, by a Write marked FUSE=second over the same
// blocks. The write happens only if the compare matches, and no other
// write to those blocks lands between the compare and the write: hosts
// (VMware's ATS, cluster file systems) build locks from this
// compare-and-swap. The writeGate below keeps every writer out of a pair's
// blocks while it runs, at no cost to plain writes while no pair is in
// flight.

// A first command's data may still be on its way (an RDMA READ) when its
// second arrives and is ready to run: the second then waits for the first
// to execute (parkSecond). Fabrics never completes a command that has
// not executed: the transport may still be filling its buffer. Nothing of
// a pair is held outside the poller until it runs on a worker, so Close
// need not wait for a pair whose data never came.

// prepareFused validates fused commands and pairs them up. It also fails
// a waiting first command whose second never came.
func (q *Queue) prepareFused(r *Request) nvme.Status {
	first := q.fuseFirst
	fuse := r.Cmd.Fuse()
	if first != nil && fuse != nvme.FuseSecond {
		// The first command's partner is missing: it fails, and this
		// command is taken on its own.
		q.fuseFirst = nil
		q.abortFirst(first, nvme.StatusFusedMissing)
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
	case nvme.FuseSecond:
		if first == nil {
			return nvme.StatusFusedMissing | nvme.DNR
		}
		q.fuseFirst = nil
		if r.Cmd.Opcode() != nvme.IOWrite || r.Cmd.NSID() != first.Cmd.NSID() ||
			r.Cmd.SLBA() != first.Cmd.SLBA() || r.Cmd.NLB() != first.Cmd.NLB() {
			q.abortFirst(first, nvme.StatusFusedMissing)
			return nvme.StatusInvalidField | nvme.DNR
		}
		if st := q.prepareIO(r); st != 0 {
			q.abortFirst(first, nvme.StatusFusedMissing)
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

// abortFirst fails a first fused command whose second is missing, bad or
// failed, with st. If its data is still on the way it fails when it
// executes.
func (q *Queue) abortFirst(first *Request, st nvme.Status) {
	if !first.fuseReady {
		first.fuseAbort, first.status = true, st
		return
	}
	first.status = st
	q.complete(first)
}

// parkSecond makes a second command whose first has not executed yet wait
// for it, parked on the first, which runs it once it holds its data
// (Execute). It reports whether r was parked.
func (q *Queue) parkSecond(r *Request) bool {
	if first := r.pair; !first.fuseReady {
		first.parked = r
		return true
	}
	return false
}

// execFusedFirst holds the compare until its write runs, or fails it if
// the pair broke up while its data was on the way.
func execFusedFirst(q *Queue, r *Request) bool {
	r.fuseReady = true
	return r.fuseAbort
}

// execFusedWrite runs the pair, its first command executed: compare, then
// write if it matched. The first command completes with the second.
func execFusedWrite(q *Queue, r *Request) bool {
	first := r.pair
	r.also = first
	ns := r.ns
	ns.gate.lockFused(ns, r.off, r.length)
	defer ns.gate.unlockFused(r.off, r.length)
	bp := compareBufs.Get().(*[]byte)
	defer compareBufs.Put(bp)
	cur := (*bp)[:len(first.Data)]
	if err := ns.Backend.ReadAt(cur, first.off); err != nil {
		first.status = first.backendStatus(err, false) // in a gateway group, a path error
		r.status = nvme.StatusFusedFail
		return true
	}
	if !bytes.Equal(cur, first.Data) {
		first.status = nvme.StatusCompareFailed
		r.status = nvme.StatusFusedFail
		return true
	}
	writeData(r)
	return true
}

// wholeNamespace is a length that covers every block from offset 0.
const wholeNamespace = 1 << 62

// writeGate orders writes against fused Compare and Write pairs on one
// namespace. A plain write announces itself in its queue's own counter
// (IOStats.Writing) and, while no pair is in flight, goes on without a
// lock. A pair raises fused first, then waits for announced writes to
// finish; a write that sees fused raised takes the slow path through the
// span list instead. Both sides use sequentially consistent atomics, so
// either the write sees the pair or the pair sees the write (as in
// Dekker's algorithm).
type writeGate struct {
	fused atomic.Int32 // pairs running or waiting
	waits atomic.Int64 // writes that waited for a pair

	mu    sync.Mutex
	cond  *sync.Cond
	spans []gateSpan // writes and pairs holding blocks, under mu
}

type gateSpan struct {
	off, end int64
	fused    bool
}

func (g *writeGate) init() { g.cond = sync.NewCond(&g.mu) }

// busy reports whether a held span overlaps [off, end) and is of the kind
// asked for.
func (g *writeGate) busy(off, end int64, fused bool) bool {
	for _, s := range g.spans {
		if s.fused == fused && s.off < end && off < s.end {
			return true
		}
	}
	return false
}

func (g *writeGate) remove(off, end int64, fused bool) {
	for i, s := range g.spans {
		if s.off == off && s.end == end && s.fused == fused {
			g.spans = append(g.spans[:i], g.spans[i+1:]...)
			break
		}
	}
	g.cond.Broadcast()
}

// enterWrite admits a write of n bytes at off. It reports whether the
// write took the slow path, for exitWrite.
func (ns *Namespace) enterWrite(r *Request, off, n int64) bool {
	r.nsStats.Writing.Add(1)
	if ns.gate.fused.Load() == 0 {
		return false
	}
	r.nsStats.Writing.Add(-1)
	g := &ns.gate
	g.mu.Lock()
	g.cond.Broadcast() // no longer an unfenced write: see lockFused
	if g.busy(off, off+n, true) {
		g.waits.Add(1)
		g.cond.Broadcast() // for whoever watches the gate (tests)
	}
	for g.busy(off, off+n, true) {
		g.cond.Wait()
	}
	g.spans = append(g.spans, gateSpan{off, off + n, false})
	g.mu.Unlock()
	return true
}

// tryEnterWrite is enterWrite for the poller, which must not wait: it
// admits the write only on the lock-free path (no fused pair in flight on
// the namespace) and reports false otherwise, for a worker to take it.
func (ns *Namespace) tryEnterWrite(r *Request) bool {
	r.nsStats.Writing.Add(1)
	if ns.gate.fused.Load() == 0 {
		return true
	}
	r.nsStats.Writing.Add(-1)
	ns.gate.wake() // no longer an unfenced write: see lockFused
	return false
}

func (ns *Namespace) exitWrite(r *Request, off, n int64, gated bool) {
	if !gated {
		r.nsStats.Writing.Add(-1)
		if ns.gate.fused.Load() != 0 {
			ns.gate.wake() // a pair may wait for the unfenced writes to end
		}
		return
	}
	g := &ns.gate
	g.mu.Lock()
	g.remove(off, off+n, false)
	g.mu.Unlock()
}

// lockFused gives a pair its blocks: after earlier pairs on them, and
// once no other write to them is running.
func (g *writeGate) lockFused(ns *Namespace, off, n int64) {
	g.fused.Add(1)
	g.mu.Lock()
	for g.busy(off, off+n, true) {
		g.cond.Wait()
	}
	g.spans = append(g.spans, gateSpan{off, off + n, true})
	// Writes that passed before fused was raised run without a span; they
	// wake the gate as they end (exitWrite).
	for g.busy(off, off+n, false) || ns.unfencedWrites() != 0 {
		g.cond.Wait()
	}
	g.mu.Unlock()
}

// wake lets whoever waits at the gate look again.
func (g *writeGate) wake() {
	g.mu.Lock()
	g.cond.Broadcast()
	g.mu.Unlock()
}

func (g *writeGate) unlockFused(off, n int64) {
	g.mu.Lock()
	g.remove(off, off+n, true)
	g.mu.Unlock()
	g.fused.Add(-1)
}

// unfencedWrites counts writes on the lock-free path, over every queue.
func (ns *Namespace) unfencedWrites() int64 {
	return ns.sumLive(func(s *IOStats) int64 { return s.Writing.Load() })
}
