package rdma

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Resume implements fabrics.Resumer: a command that waited on its
// namespace's QoS limit, holding no data buffer, maps its data now, taking
// a buffer (or waiting for one) as a command just received does. On a
// queue pair going away it completes aborted instead: no new transfer
// starts there.
func (qp *QueuePair) Resume(fr *fabrics.Request) {
	r := &qp.reqs[fr.Tag]
	if qp.stopping.Load() {
		qp.fq.Fail(fr, nvme.StatusAbortSQDeleted)
		return
	}
	qp.mapData(r)
}

// letGoOfRecv gives the receive buffer of r, a command that waits on its
// namespace's QoS limit with in-capsule data, back to the shared receive
// queue, its in-capsule data copied out first. A waiter may wait seconds,
// and a throttled host may have its whole queue waiting: holding their
// receive buffers, one tenant's backlog would empty the queue every host
// on the device receives from, and stall them all in RNR retries.
//
// The copy goes to a buffer of the queue pair's own, not to the data
// buffer pool: a waiter holds no pool buffer either, for the same reason.
// Only the CPU reads in-capsule data (the backend, or the keyed
// descriptors), so the buffer needs no registration. A buffer is the
// command's in-capsule length, made the first time a command of this
// queue pair waits and reused by the next that fits; the queue pair drops
// them as its poller goes to sleep with none lent (dropWaitBufs). A
// command that does not wait copies nothing. A queue pair's own receive
// ring is its alone: there the buffer stays with the command.
func (qp *QueuePair) letGoOfRecv(r *request) {
	if !qp.rq.shared() {
		return
	}
	b := qp.waitBuf(len(r.inline))
	r.waitBuf = b
	r.inline = b[:copy(b, r.inline)]
	qp.postRecv(r.recv)
	r.recv = -1
}

// waitBuf is a buffer of n bytes for a waiting command's in-capsule data:
// the last one given back, if it holds n bytes, or a new one.
func (qp *QueuePair) waitBuf(n int) []byte {
	qp.waitLent++
	if k := len(qp.waitBufs); k > 0 && cap(qp.waitBufs[k-1]) >= n {
		b := qp.waitBufs[k-1]
		qp.waitBufs[k-1] = nil
		qp.waitBufs = qp.waitBufs[:k-1]
		return b[:n]
	}
	return make([]byte, n)
}

// giveWaitBuf takes back the buffer of a command that waited.
func (qp *QueuePair) giveWaitBuf(b []byte) {
	qp.waitLent--
	if len(qp.waitBufs) < cap(qp.waitBufs) {
		qp.waitBufs = append(qp.waitBufs, b)
	}
}

// dropWaitBufs lets go of the buffers kept for waiting commands once none
// waits: a queue pair throttled once does not keep them for its life.
func (qp *QueuePair) dropWaitBufs() {
	if qp.waitLent == 0 && len(qp.waitBufs) > 0 {
		clear(qp.waitBufs)
		qp.waitBufs = qp.waitBufs[:0]
	}
}
