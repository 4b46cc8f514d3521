package rdma

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

const (
	// adminDataBuffers is the number of data buffers of an admin queue:
	// admin commands are few and mostly small.
	adminDataBuffers = 4
	// smallBuffer is the size of the data buffers most commands use; one
	// per receive. Transfers above it, up to fabrics.MaxDataTransfer, take
	// one of a few large buffers, so MDTS costs little pinned memory.
	smallBuffer = 128 << 10
	// pageSize aligns the segments O_DIRECT backends read and write.
	pageSize = 4096
)

// largeBuffers is how many MaxDataTransfer-sized buffers a queue pair of
// depth has.
func largeBuffers(depth int, admin bool) int {
	if admin {
		return 1
	}
	return max(2, depth/32)
}

// bufferPool is one size class of data buffers: the free ones, and the
// requests waiting for one, oldest first.
type bufferPool struct {
	free    []int32
	waiting []int32
}

// take returns a free buffer, or queues request tag and returns -1.
func (p *bufferPool) take(tag int32) int32 {
	if len(p.free) == 0 {
		p.waiting = append(p.waiting, tag)
		return -1
	}
	d := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return d
}

// give hands buffer d to the oldest waiting request, returned, or frees it
// and returns -1.
func (p *bufferPool) give(d int32) int32 {
	if len(p.waiting) == 0 {
		p.free = append(p.free, d)
		return -1
	}
	next := p.waiting[0]
	copy(p.waiting, p.waiting[1:])
	p.waiting = p.waiting[:len(p.waiting)-1]
	return next
}

// put frees buffer d without handing it on: at teardown nobody waits any
// more.
func (p *bufferPool) put(d int32) { p.free = append(p.free, d) }

// memLayout is where each kind of buffer lives in a queue pair's one
// registered region: in-capsule data and data buffers first, on page
// boundaries for O_DIRECT backends, then commands and responses.
type memLayout struct {
	inlineStride                  int
	inline, data, large, cmd, rsp int
	total                         int
}

func layOut(sz queueSizes) memLayout {
	// In-capsule data gets its own page-aligned segment so that O_DIRECT
	// backends can write it where it landed.
	m := memLayout{inlineStride: align(sz.inline, pageSize)}
	m.data = m.inline + sz.depth*m.inlineStride
	m.large = m.data + sz.ndata*smallBuffer
	m.cmd = m.large + sz.nlarge*fabrics.MaxDataTransfer
	m.rsp = m.cmd + sz.depth*nvme.CommandSize
	m.total = align(m.rsp+sz.nreq*nvme.CompletionSize, pageSize)
	return m
}

func align(n, a int) int { return (n + a - 1) / a * a }

// slot is n bytes of buf at off, capped so that no view reaches its
// neighbour.
func slot(buf []byte, off, n int) []byte { return buf[off : off+n : off+n] }

// carve cuts buf (m.total bytes) into the queue pair's receive buffers,
// data buffer pools and requests, every request free.
func (qp *QueuePair) carve(buf []byte, sz queueSizes, m memLayout) {
	qp.cmdBufs = make([][]byte, sz.depth)
	qp.inlineBufs = make([][]byte, sz.depth)
	for i := range qp.cmdBufs {
		qp.cmdBufs[i] = slot(buf, m.cmd+i*nvme.CommandSize, nvme.CommandSize)
		qp.inlineBufs[i] = slot(buf, m.inline+i*m.inlineStride, sz.inline)
	}
	qp.dataBufs = make([][]byte, sz.ndata+sz.nlarge)
	qp.nsmall = int32(sz.ndata)
	qp.small = bufferPool{free: make([]int32, 0, sz.ndata), waiting: make([]int32, 0, sz.nreq)}
	qp.large = bufferPool{free: make([]int32, 0, sz.nlarge), waiting: make([]int32, 0, sz.nreq)}
	for i := sz.ndata - 1; i >= 0; i-- {
		qp.dataBufs[i] = slot(buf, m.data+i*smallBuffer, smallBuffer)
		qp.small.free = append(qp.small.free, int32(i))
	}
	for i := sz.nlarge - 1; i >= 0; i-- {
		qp.dataBufs[sz.ndata+i] = slot(buf, m.large+i*fabrics.MaxDataTransfer, fabrics.MaxDataTransfer)
		qp.large.free = append(qp.large.free, int32(sz.ndata+i))
	}
	qp.reqs = make([]request, sz.nreq)
	qp.freeReqs = make([]int32, 0, sz.nreq)
	for i := range qp.reqs {
		r := &qp.reqs[i]
		r.Rsp = nvme.Completion(slot(buf, m.rsp+i*nvme.CompletionSize, nvme.CompletionSize))
		r.Tag = i
		r.recv, r.data = -1, -1
		qp.freeReqs = append(qp.freeReqs, int32(sz.nreq-1-i))
	}
	qp.inState = [numStates]int32{stateFree: int32(sz.nreq)}
}

// poolOf is the pool data buffer d belongs to.
func (qp *QueuePair) poolOf(d int32) *bufferPool {
	if d >= qp.nsmall {
		return &qp.large
	}
	return &qp.small
}

// buffersHome reports whether every data buffer is back in its pool.
func (qp *QueuePair) buffersHome() bool {
	return len(qp.small.free)+len(qp.large.free) == len(qp.dataBufs)
}
