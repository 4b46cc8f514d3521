package rdma

import (
	"errors"
	"fmt"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// pageSize aligns the segments O_DIRECT backends read and write.
const pageSize = 4096

func align(n, a int) int { return (n + a - 1) / a * a }

// slot is n bytes of buf at off, capped so that no view reaches its
// neighbour.
func slot(buf []byte, off, n int) []byte { return buf[off : off+n : off+n] }

// errNoResponseMemory refuses a queue pair when the device's response
// memory is spoken for.
var errNoResponseMemory = errors.New("the device's response buffers are all in use by other queue pairs")

// takeMemory gives the queue pair its receive buffers (the device's
// shared receive queue newQueuePair chose, or its own ring) and its
// response capsules from the device's memory, and sets up its requests.
// Only the own ring registers memory here; the rest was registered when
// the port listened.
func (qp *QueuePair) takeMemory(sz queueSizes) error {
	if qp.rq == nil {
		ring, err := newRecvRing(qp.dev, sz.depth, sz.inline)
		if err != nil {
			return err
		}
		qp.rq, qp.ownRing = ring, true
	}
	qp.pool, qp.ctl = qp.dev.pool, qp.dev.ctl
	qp.rspOrder = orderFor(uint32(sz.nreq * nvme.CompletionSize))
	if qp.rspUnit = qp.ctl.alloc(qp.rspOrder); qp.rspUnit < 0 {
		return fmt.Errorf("%w (%d queue pairs of depth 128 fit)", errNoResponseMemory, controlPool/unitSize)
	}
	qp.carve(sz)
	return nil
}

// joinOnConnect counts an I/O queue pair in the pool's shares once its
// Connect made it a controller's (Complete): a queue pair that connects
// no further shrinks nobody's share. Admin queues carry small transfers,
// from the region kept for them: the main region is the I/O queues'.
func (qp *QueuePair) joinOnConnect() {
	if qp.qid != 0 && qp.fq.Controller() != nil {
		qp.pool.join()
		qp.joined = true
	}
}

// carve sets up the requests, each with its response capsule, every
// request free.
func (qp *QueuePair) carve(sz queueSizes) {
	rsp := qp.ctl.block(qp.rspUnit, uint32(unitSize<<qp.rspOrder))
	qp.cache = qp.pool.newCache()
	qp.granted = make(chan grant, sz.nreq)
	qp.reqs = make([]request, sz.nreq)
	qp.freeReqs = make([]int32, 0, sz.nreq)
	qp.parked = make([]int32, 0, sz.nreq)
	qp.waitBufs = make([][]byte, 0, sz.nreq)
	for i := range qp.reqs {
		r := &qp.reqs[i]
		r.Rsp = nvme.Completion(slot(rsp, i*nvme.CompletionSize, nvme.CompletionSize))
		r.Tag = i
		r.Cmd = nvme.Command(r.cmd[:])
		r.recv, r.data, r.spare, r.pairWait = -1, -1, -1, -1
		qp.freeReqs = append(qp.freeReqs, int32(sz.nreq-1-i))
	}
	qp.inState = [numStates]int32{stateFree: int32(sz.nreq)}
}

// freeMemory gives back what takeMemory took.
func (qp *QueuePair) freeMemory() {
	if qp.joined {
		qp.pool.leave()
		qp.joined = false
	}
	if qp.ctl != nil && qp.rspUnit >= 0 {
		qp.ctl.give(qp.rspOrder, qp.rspUnit, nil)
		qp.rspUnit = -1
	}
	if qp.ownRing {
		qp.rq.free()
	}
	qp.rq = nil
}

// buffersHome reports whether every data block the queue pair took is
// back.
func (qp *QueuePair) buffersHome() bool { return qp.held == 0 }
