package rdma

import (
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A command waiting for a data block (stateNeedBuffer: parked past its
// queue pair's share, in the pool's line, or a fused second waiting with
// its first) was admitted by its namespace's rules but has not executed,
// and may wait as long as another host holds the pool. A change of access
// (fabrics' fence) does not wait for it: it asks the queue pair to check
// its waiting commands again (Recheck), and the poller fails those the
// rules now refuse, as a command whose data could not be mapped, giving
// back their place in line. The poller pays one flag load a pass for it.

// Recheck implements fabrics.Rechecker: the poller checks the requests
// waiting for a data block again on its next pass. It does not block, and
// does nothing to a queue pair torn down.
func (qp *QueuePair) Recheck() {
	qp.recheck.Store(true)
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if !qp.destroyed && qp.sleeping.Load() {
		qp.kick() // the eventfd is open until destroyed
	}
}

// recheckWaiting fails the requests waiting for a data block that
// fabrics.Queue.Readmit now refuses. The pool may have served one before
// it could leave the line: its grant is in qp.granted by then, and is
// checked as it is taken.
func (qp *QueuePair) recheckWaiting() {
	qp.recheck.Store(false)
	if qp.stopping.Load() {
		return // teardown fails them all
	}
	for i := range qp.reqs {
		r := &qp.reqs[i]
		if r.state != stateNeedBuffer {
			continue
		}
		if st := qp.fq.Readmit(&r.Request); st != 0 && qp.withdraw(r) {
			qp.refuse(r, st)
		}
	}
	for {
		var g grant
		select {
		case g = <-qp.granted:
		default:
			return
		}
		r := &qp.reqs[g.tag]
		if r.state == stateNeedBuffer {
			if st := qp.fq.Readmit(&r.Request); st != 0 {
				qp.heldBytes -= shareBytes(g.order) // counted as it queued (takeBlock)
				qp.pool.give(g.order, g.unit, nil)
				if g.spare >= 0 {
					qp.heldBytes -= shareBytes(g.order)
					qp.pool.give(g.order, g.spare, nil)
				}
				qp.refuse(r, st)
				continue
			}
		}
		qp.runGrant(g)
	}
}

// withdraw takes r, waiting for a data block, out of its wait. It reports
// false if the pool served it already.
func (qp *QueuePair) withdraw(r *request) bool {
	tag := int32(r.Tag)
	if i := slices.Index(qp.parked, tag); i >= 0 {
		qp.parked = slices.Delete(qp.parked, i, i+1)
		return true
	}
	for i := range qp.reqs {
		if f := &qp.reqs[i]; f.pairWait == tag && f.state == stateNeedBuffer {
			f.pairWait = -1 // its block goes back as the first's grant comes (placeSpare)
			return true
		}
	}
	n := qp.pool.withdraw(qp, tag)
	qp.heldBytes -= int64(n) * shareBytes(r.order)
	return n > 0
}

// refuse fails r, which waits for a data block and holds none, with st; a
// fused first's second that waits with it fails as its pair broke up.
func (qp *QueuePair) refuse(r *request, st nvme.Status) {
	if s := r.pairWait; s >= 0 {
		r.pairWait = -1
		if sr := &qp.reqs[s]; sr.state == stateNeedBuffer && qp.move(sr, stateExecuting) {
			qp.fq.Fail(&sr.Request, nvme.StatusFusedFail)
		}
	}
	if qp.cache.pairFirst == int32(r.Tag) {
		qp.cache.pairFirst = -1
	}
	if qp.move(r, stateExecuting) {
		qp.fq.Fail(&r.Request, st)
	}
}

var _ fabrics.Rechecker = (*QueuePair)(nil)
