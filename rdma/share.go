package rdma

import "github.com/nvmeof-tgt/nvmeof-tgt/nvme"

// No queue pair holds the buffer pool from the others. A host can keep a
// command's data block for as long as it likes: a read whose response
// SEND it never takes (the device retries it, RNR, for ever), with every
// later response of the queue pair behind it. Without a bound, one queue
// full of 1 MiB reads pins a whole pool of the default size, and every
// other host's large transfers wait for ever.
//
// So each I/O queue pair of a device, from its Connect, may hold, of the
// pool's main region and for its transfers larger than 32 KiB (counting
// the blocks its requests wait for in the pool's lines):
//
//   - minShare, always: what it needs to stream at all;
//   - up to its share (the region split evenly among the I/O queue pairs,
//     at least minShare) while the region keeps a reserve free (a quarter
//     of it, at least minShare);
//   - past its share, borrowing, only while nobody waits for a block, and
//     the reserve stays free.
//
// So whatever queue pairs hold, and however many connected since they
// took it, the reserve is left for queue pairs under minShare: a host that
// holds its buffers keeps at most what is free past the reserve, and
// every other queue pair still streams. A request that may not take its
// block waits on its own queue pair (parked), not in the pool's lines, and
// tries again as the queue pair's own blocks come back: its queue pair
// holds more than minShare, so they come back unless its host holds them,
// and then it is that host that waits. Transfers of 32 KiB and less,
// admin commands' among them, draw first on the region kept for them
// (pool.go) and count against no share: a queue pair holds at most one
// per request.
//
// The hot path pays a comparison with the queue pair's own count and, past
// minShare, atomic loads of the pool's free count and share, on the cache
// line of the waiter count it reads already, and the reserve, set once.

// minShare is what a queue pair may always hold, and the least reserve: two
// transfers of the largest size, one moving its data while the other
// executes, so that a queue pair streams at full size however many share
// the pool.
const minShare = 2 * maxBlock

// join counts a queue pair in the pool's shares; leave, as it goes.
func (p *dataPool) join()  { p.setShare(p.qps.Add(1)) }
func (p *dataPool) leave() { p.setShare(p.qps.Add(-1)) }

func (p *dataPool) setShare(qps int32) {
	p.share.Store(max(minShare, p.main/int64(max(qps, 1))))
}

// mainBytes is the size of the main region: the pool less the part kept
// for small transfers.
func (p *dataPool) mainBytes() int64 { return p.main }

// mainFree is at most the bytes free in the main region: the main region
// less all that is in use, the small transfers' region and the queue
// pairs' caches included. It is read from the count the pool keeps
// anyway, so that taking a block stores nothing more.
func (p *dataPool) mainFree() int64 { return p.mainBytes() - p.inUse.Load() }

// mayTake reports whether qp may take n more bytes of data blocks: up to
// minShare always; past it only while the main region keeps its reserve
// free, and past its share only while nobody waits for a block either.
func (qp *QueuePair) mayTake(n int64) bool {
	p := qp.pool
	held := qp.heldBytes + n
	if held <= minShare {
		return true
	}
	if p.mainFree()-n < p.reserve {
		return false
	}
	return held <= p.share.Load() || p.nwait.Load() == 0
}

// park keeps r, which may not take a block past its queue pair's share,
// waiting on the queue pair until its blocks come back (runParked).
func (qp *QueuePair) park(r *request) {
	qp.parked = append(qp.parked, int32(r.Tag))
	qp.pool.overShare.Add(1)
}

// runParked starts the parked requests that may take their block now,
// oldest first. A stopping queue pair leaves them to teardown.
func (qp *QueuePair) runParked() {
	for len(qp.parked) > 0 && !qp.stopping.Load() {
		r := &qp.reqs[qp.parked[0]]
		n := int8(1)
		if r.Cmd.Fuse() == nvme.FuseFirst {
			n = 2 // its second's block too
		}
		bytes := int64(n) * shareBytes(r.order)
		if r.state == stateNeedBuffer && !qp.mayTake(bytes) {
			return
		}
		qp.parked = qp.parked[:copy(qp.parked, qp.parked[1:])]
		if r.state != stateNeedBuffer {
			invalidTransitions.Add(1) // a bug: it waits for a block no more
			continue
		}
		if !qp.takeNow(r, n, bytes) {
			continue // it waits in the pool's line now, for a grant
		}
		qp.startTransfer(r)
		if r.pairWait >= 0 {
			// Its second came while it was parked, and waits for it.
			u := r.spare
			r.spare = -1
			qp.placeSpare(r, u)
		}
	}
}

// shareBytes is what a block of order o counts against a share: its size,
// or nothing for a small transfer's. Those take the region kept for them
// first, and a queue pair holds at most one per request of them.
func shareBytes(o int8) int64 {
	if o <= smallOrder {
		return 0
	}
	return unitSize << o
}
