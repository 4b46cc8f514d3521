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
// descriptors), so the buffer needs no registration. The buffers are made
// the first time a command of this queue pair waits and reused after:
// none for a queue pair never throttled, at most one per request (the
// queue's 2 × depth) for one that is. A command that does not wait copies
// nothing. A queue pair's own receive ring is its alone: there the buffer
// stays with the command.
func (qp *QueuePair) letGoOfRecv(r *request) {
	if !qp.rq.shared() {
		return
	}
	var b []byte
	if n := len(qp.waitBufs); n > 0 {
		b = qp.waitBufs[n-1]
		qp.waitBufs = qp.waitBufs[:n-1]
	} else {
		b = make([]byte, len(qp.rq.inline[r.recv]))
	}
	r.waitBuf = b
	r.inline = b[:copy(b, r.inline)]
	qp.postRecv(r.recv)
	r.recv = -1
}
