package rdma

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// dataPool is a device's data buffers: one registered region, registered
// when the first port listens on the device, that every queue pair on the
// device draws its transfers from. Registered memory so follows the I/O in
// flight, not the number of queues connected (as SPDK's shared buffer
// pool; nvmet allocates per command instead).
//
// Transfers up to 32 KiB draw first on a part of it kept for them (small),
// so that large transfers cannot hold every block. A request that finds
// the pool dry waits its turn, and the block that
// frees up goes straight to a waiter, on whichever queue pair it is, whose
// poller is woken to run it. Nothing fails for want of a buffer. Waiters
// queue first come, first served in one queue per block size, so that a
// 1 MiB transfer waiting for a whole free megabyte does not hold up the
// 4 KiB ones behind it: a freed block goes to the smallest waiter it fits.
// Once the first in a line has been first for longer than maxBypass it is
// served before anyone else, and nobody else is, until it fits: small
// transfers cannot starve a large one by keeping every megabyte
// fragmented, and large ones hold up small ones for one transfer at a
// time.
//
// Each queue pair keeps a few free blocks of each order (qpCache) so that
// most takes and gives touch no lock another queue contends. The caches
// are bounded to a small share of the pool, spill back when a queue pair
// goes idle, and are bypassed and emptied while anyone waits, so an idle
// queue pair never starves a busy one. How much of the pool one queue
// pair may hold, whatever its host does with it, is share.go's.
type dataPool struct {
	mem *memoryRegion

	mu sync.Mutex
	b  *buddy // the main region: transfers of every size
	// small is the region kept for small transfers (up to smallOrder),
	// as SPDK keeps small buffers apart from large ones: a streamer of
	// large transfers cannot hold it all. Its units start at smallBase;
	// nil for a pool under minSplitPool.
	small     *buddy
	smallBase int32
	waiting   [maxOrder + 1]waitQueue // by order, oldest first
	// now is the clock waits are aged by; maxBypass is how long the first
	// in a line lets others overtake it (0: nobody overtakes anybody,
	// strictly first come, first served across sizes).
	now       func() time.Duration
	maxBypass time.Duration

	nwait atomic.Int32 // waiters, read without mu on the hot path
	inUse atomic.Int64 // bytes out of the buddy: held by requests or in caches
	waits atomic.Uint64

	// The queue pairs' shares (share.go). main and reserve are set
	// once, by newDataPool.
	main      int64         // bytes of the main region
	reserve   int64         // what only queue pairs under minShare take
	qps       atomic.Int32  // queue pairs drawing on the pool
	share     atomic.Int64  // each one's share of the main region, in bytes
	overShare atomic.Uint64 // requests that waited past their queue pair's share
}

// defaultMaxBypass bounds how long smaller transfers may overtake a
// waiting one: a few 1 MiB transfers' worth on a slow link.
const defaultMaxBypass = 2 * time.Millisecond

// waiter is a request waiting for n blocks of one order (two for a fused
// pair's first command: see takeBlock).
type waiter struct {
	qp    *QueuePair
	tag   int32
	order int8
	n     int8
	since time.Duration // when it queued, or came first in its line
}

// grant hands a block of order (and the pair's second block, or -1) to a
// waiting request of a queue pair.
type grant struct {
	tag, unit, spare int32
	order            int8
}

var poolEpoch = time.Now()

func monotonic() time.Duration { return time.Since(poolEpoch) }

// Small transfers' region: 4 KiB to 32 KiB transfers take their blocks
// from it first. It is a 16th of the pool, at least one 1 MiB block, in
// pools of 4 MiB and more.
const (
	smallOrder   = 3
	minSplitPool = 4 * maxBlock
)

func newDataPool(mem *memoryRegion) *dataPool {
	units := len(mem.buf) >> unitShift
	smallUnits := 0
	if len(mem.buf) >= minSplitPool {
		smallUnits = max(units/16, 1<<maxOrder) &^ (1<<maxOrder - 1)
	}
	p := &dataPool{mem: mem, b: newBuddy(units - smallUnits), now: monotonic, maxBypass: defaultMaxBypass}
	if smallUnits > 0 {
		p.small, p.smallBase = newBuddy(smallUnits), int32(units-smallUnits)
	}
	p.main = int64(units-smallUnits) << unitShift
	// Kept even from a queue pair alone: the next to connect finds it.
	p.reserve = max(minShare, p.main/4)
	p.setShare(0)
	return p
}

// block is the memory of block u, n bytes of it.
func (p *dataPool) block(u int32, n uint32) []byte {
	off := int(u) << unitShift
	return p.mem.buf[off : off+int(n) : off+int(n)]
}

func (p *dataPool) size() int64 { return int64(len(p.mem.buf)) }

// take allocates n blocks of order o (the second, or -1, as spare),
// filling cache with up to batch more while nobody waits. It returns -1,
// and queues the request as a waiter, if they are not free or the request
// must let earlier ones go first. A stopping queue pair's request does not
// queue: teardown takes it back.
func (p *dataPool) take(qp *QueuePair, tag int32, o, n int8, cache *[]int32, batch int) (u, spare int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if u, spare, ok := p.tryTake(o, n); ok {
		if p.nwait.Load() > 0 {
			batch = 0 // what frees up is for the waiters
		}
		for range batch {
			c, _, ok := p.allocN(o, 1, true)
			if !ok {
				break
			}
			*cache = append(*cache, c)
		}
		p.account()
		return u, spare
	}
	if !qp.stopping.Load() {
		p.waiting[o].push(waiter{qp: qp, tag: tag, order: o, n: n, since: p.now()})
		p.nwait.Add(1)
		p.waits.Add(1)
	}
	return -1, -1
}

// tryTake allocates for a new request unless it must queue behind others:
// earlier ones of its size, or one that was first in its line for
// maxBypass (only for the main region: the small one cannot serve it).
func (p *dataPool) tryTake(o, n int8) (u, spare int32, ok bool) {
	if p.nwait.Load() == 0 {
		return p.allocN(o, n, true)
	}
	if p.waiting[o].len() > 0 {
		return -1, -1, false
	}
	_, urgent := p.oldest()
	return p.allocN(o, n, !urgent)
}

// oldest is the order of the line whose first has waited longest, and
// whether it waited past maxBypass; -1 if nobody waits.
func (p *dataPool) oldest() (int8, bool) {
	best := int8(-1)
	for o := range p.waiting {
		q := &p.waiting[o]
		if q.len() > 0 && (best < 0 || q.front().since < p.waiting[best].front().since) {
			best = int8(o)
		}
	}
	if best < 0 {
		return -1, false
	}
	return best, p.now()-p.waiting[best].front().since >= p.maxBypass
}

// allocN allocates n (1 or 2) blocks of order o, both or none: for a
// small transfer from the small region first, then, if main, from the
// main one.
func (p *dataPool) allocN(o, n int8, main bool) (u, spare int32, ok bool) {
	if p.small != nil && o <= smallOrder {
		if u, spare, ok = allocIn(p.small, o, n); ok {
			return u + p.smallBase, shiftUnit(spare, p.smallBase), true
		}
	}
	if !main {
		return -1, -1, false
	}
	return allocIn(p.b, o, n)
}

func shiftUnit(u, by int32) int32 {
	if u < 0 {
		return u
	}
	return u + by
}

func allocIn(b *buddy, o, n int8) (u, spare int32, ok bool) {
	if u = b.alloc(o); u < 0 {
		return -1, -1, false
	}
	spare = -1
	if n == 2 {
		if spare = b.alloc(o); spare < 0 {
			b.free(u, o)
			return -1, -1, false
		}
	}
	return u, spare, true
}

// free returns block u of order o to its region.
func (p *dataPool) free(u int32, o int8) {
	if p.small != nil && u >= p.smallBase {
		p.small.free(u-p.smallBase, o)
		return
	}
	p.b.free(u, o)
}

// alloc allocates a block of order o, or returns -1; nobody waits for it.
func (p *dataPool) alloc(o int8) int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	u, _, _ := p.allocN(o, 1, true)
	p.account()
	return u
}

// give returns block u and units, all of order o, and serves the waiters
// they make room for.
func (p *dataPool) give(o int8, u int32, units []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free(u, o)
	for _, u := range units {
		p.free(u, o)
	}
	p.serve()
	p.account()
}

// giveAll returns block u of order o and every block of a queue pair's
// cache.
func (p *dataPool) giveAll(o int8, u int32, c *qpCache) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free(u, o)
	p.emptyCache(c)
}

// giveCache returns every block of a queue pair's cache.
func (p *dataPool) giveCache(c *qpCache) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.emptyCache(c)
}

func (p *dataPool) emptyCache(c *qpCache) {
	for o := range c.free {
		for _, u := range c.free[o] {
			p.free(u, int8(o))
		}
		c.free[o] = c.free[o][:0]
	}
	p.serve()
	p.account()
}

// serve hands free blocks to waiters: to the oldest one that waited past
// maxBypass, and to nobody else until it fits; otherwise to the oldest
// waiter of the smallest size that fits. Called with mu held.
func (p *dataPool) serve() {
	for p.nwait.Load() > 0 {
		o, urgent := p.oldest()
		main := true
		switch {
		case !urgent:
			o = p.smallestFitting(true)
		case !p.fits(o, p.waiting[o].front().n, true):
			// Small transfers may still take what the one in need
			// cannot use.
			o, main = p.smallestFitting(false), false
		}
		if o < 0 {
			return
		}
		q := &p.waiting[o]
		w := q.front()
		u, spare, ok := p.allocN(o, w.n, main)
		if !ok {
			return
		}
		w.qp.granted <- grant{tag: w.tag, unit: u, spare: spare, order: o} // never full: one grant per request
		w.qp.Wake()
		q.pop()
		p.nwait.Add(-1)
		if q.len() > 0 && p.maxBypass > 0 {
			// The next in line ages from now: one large transfer goes
			// before the small ones at a time, not a whole queue of them
			// that waited together.
			f := q.front()
			f.since = max(f.since, p.now())
		}
	}
}

// smallestFitting is the smallest order whose oldest waiter's blocks are
// free (in the small region only, unless main), or -1. Small transfers go
// first: they give their blocks back soonest, and a large one that waits
// too long gets precedence (serve).
func (p *dataPool) smallestFitting(main bool) int8 {
	for o := range p.waiting {
		q := &p.waiting[o]
		if q.len() > 0 && p.fits(int8(o), q.front().n, main) {
			return int8(o)
		}
	}
	return -1
}

// fits reports whether n blocks of order o are free (see allocN).
func (p *dataPool) fits(o, n int8, main bool) bool {
	u, spare, ok := p.allocN(o, n, main)
	if ok {
		p.free(u, o)
		if spare >= 0 {
			p.free(spare, o)
		}
	}
	return ok
}

// stop takes a queue pair that started stopping out of the running: its
// waiters leave the queues and the blocks granted to it that it has not
// taken go back, to the waiters of live queue pairs. Its poller may not
// run again before teardown, which can wait long for the backend, so the
// pool does it under its own lock. Requests of a stopping queue pair
// queue no more (take).
func (p *dataPool) stop(qp *QueuePair) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop(qp)
	for {
		select {
		case g := <-qp.granted:
			p.free(g.unit, g.order)
			if g.spare >= 0 {
				p.free(g.spare, g.order)
			}
			continue
		default:
		}
		break
	}
	p.serve()
	p.account()
}

// forget drops qp's waiters: it is going, and grants after this would
// find nobody to run.
func (p *dataPool) forget(qp *QueuePair) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop(qp)
}

// withdraw takes request tag of qp out of the pool's lines, and serves
// those it held up. It returns the blocks it waited for: 0 if it waits in
// no line (served already).
func (p *dataPool) withdraw(qp *QueuePair, tag int32) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for o := range p.waiting {
		if n := p.waiting[o].removeOne(qp, tag); n > 0 {
			p.nwait.Add(-1)
			p.serve()
			p.account()
			return n
		}
	}
	return 0
}

func (p *dataPool) drop(qp *QueuePair) {
	for o := range p.waiting {
		p.nwait.Add(-int32(p.waiting[o].remove(qp)))
	}
}

func (p *dataPool) account() {
	free := p.b.freeUnits
	if p.small != nil {
		free += p.small.freeUnits
	}
	p.inUse.Store(p.size() - int64(free)<<unitShift)
}

// waitQueue is one order's waiters, oldest first.
type waitQueue struct {
	w    []waiter
	head int
}

func (q *waitQueue) len() int       { return len(q.w) - q.head }
func (q *waitQueue) front() *waiter { return &q.w[q.head] }

func (q *waitQueue) push(w waiter) {
	if q.head > 0 && len(q.w) == cap(q.w) {
		n := copy(q.w, q.w[q.head:])
		clear(q.w[n:])
		q.w, q.head = q.w[:n], 0
	}
	q.w = append(q.w, w)
}

func (q *waitQueue) pop() {
	q.w[q.head] = waiter{}
	if q.head++; q.head == len(q.w) {
		q.w, q.head = q.w[:0], 0
	}
}

// remove drops qp's waiters and returns how many.
func (q *waitQueue) remove(qp *QueuePair) int {
	kept := q.w[:0]
	for _, w := range q.w[q.head:] {
		if w.qp != qp {
			kept = append(kept, w)
		}
	}
	n := q.len() - len(kept)
	clear(q.w[len(kept):])
	q.w, q.head = kept, 0
	return n
}

// removeOne drops qp's waiter for request tag and returns the blocks it
// waited for, or 0 if it is not in the line.
func (q *waitQueue) removeOne(qp *QueuePair, tag int32) int {
	for i := q.head; i < len(q.w); i++ {
		if w := q.w[i]; w.qp == qp && w.tag == tag {
			q.w = slices.Delete(q.w, i, i+1)
			if q.head == len(q.w) {
				q.w, q.head = q.w[:0], 0
			}
			return int(w.n)
		}
	}
	return 0
}

// qpCache is a queue pair's free blocks of each order, and the fused
// first command whose second is the next capsule: it holds (spare), or
// waits for, its second's block with its own.
type qpCache struct {
	free      [maxOrder + 1][]int32
	pairFirst int32
}

// cacheSize is how many blocks of order o a queue pair keeps: enough
// 4 KiB blocks for a burst, one of the largest, and never more than a
// 64th of a pool of poolBytes per order, so that a small pool is not
// pinned in the caches of idle queue pairs.
func cacheSize(o int8, poolBytes int64) int {
	return min(max(1, 16>>(o/2)), int(poolBytes>>6>>(unitShift+int(o))))
}

func (p *dataPool) newCache() qpCache {
	c := qpCache{pairFirst: -1}
	for o := range c.free {
		c.free[o] = make([]int32, 0, cacheSize(int8(o), p.size()))
	}
	return c
}

func (c *qpCache) empty() bool {
	for o := range c.free {
		if len(c.free[o]) > 0 {
			return false
		}
	}
	return true
}

// takeBlock gives r a data block of r.order, from the queue pair's cache
// or the pool. It returns false if r now waits for a grant. A fused first
// command takes its second's block with its own, both at once: a pair
// holding half of what it needs while the other half waits behind other
// queue pairs' requests could wait for ever on a dry pool.
func (qp *QueuePair) takeBlock(r *request) bool {
	n := int8(1)
	if r.Cmd.Fuse() == nvme.FuseFirst {
		n = 2
		qp.cache.pairFirst = int32(r.Tag)
	}
	bytes := int64(n) * shareBytes(r.order)
	// Behind parked requests a new one parks too, whatever it may take:
	// it must not overtake them. A fused first parks before it takes
	// anything, its second's block with it (runParked).
	if bytes > 0 && (len(qp.parked) > 0 || !qp.mayTake(bytes)) {
		qp.park(r)
		return false
	}
	return qp.takeNow(r, n, bytes)
}

// takeNow gives r its n blocks, of bytes against the share, from the
// cache or the pool, past the share check. It returns false if r now
// waits for a grant.
func (qp *QueuePair) takeNow(r *request, n int8, bytes int64) bool {
	c := &qp.cache.free[r.order]
	if len(*c) >= int(n) && qp.pool.nwait.Load() == 0 {
		r.data = (*c)[len(*c)-1]
		if n == 2 {
			r.spare = (*c)[len(*c)-2]
		}
		*c = (*c)[:len(*c)-int(n)]
		qp.held += int(n)
		qp.heldBytes += bytes
		return true
	}
	// Counted now, taken or not: a request waiting in the pool's line is
	// granted its block later whatever the queue pair took meanwhile.
	qp.heldBytes += bytes
	u, spare := qp.pool.take(qp, int32(r.Tag), r.order, n, c, cap(*c)/2-len(*c))
	if u < 0 {
		return false
	}
	r.data, r.spare = u, spare
	qp.held += int(n)
	return true
}

// pairBlock gives a fused second command the block its first took for it
// (got). If the first still waits for both, r waits with it (waits): the
// first's grant starts r too. Neither, if r is no such second.
func (qp *QueuePair) pairBlock(r *request) (got, waits bool) {
	if r.Cmd.Fuse() != nvme.FuseSecond || qp.cache.pairFirst < 0 {
		return false, false
	}
	f := &qp.reqs[qp.cache.pairFirst]
	qp.cache.pairFirst = -1
	switch {
	case f.order != r.order:
	case f.spare >= 0:
		r.data, f.spare = f.spare, -1
		return true, false
	case f.state == stateNeedBuffer:
		f.pairWait = int32(r.Tag)
		return false, true
	}
	qp.dropSpare(f)
	return false, false
}

// endPair gives back the block a fused first command took for its second
// once the next capsule, r, turned out not to need it.
func (qp *QueuePair) endPair(r *request) {
	if f := qp.cache.pairFirst; f >= 0 && f != int32(r.Tag) {
		qp.cache.pairFirst = -1
		qp.dropSpare(&qp.reqs[f])
	}
}

// dropSpare returns the block r took for its fused second, if it holds one.
func (qp *QueuePair) dropSpare(r *request) {
	if qp.cache.pairFirst == int32(r.Tag) {
		qp.cache.pairFirst = -1
	}
	if r.spare >= 0 {
		u := r.spare
		r.spare = -1
		qp.giveBlock(u, r.order)
	}
}

// giveBlock returns block u of order o: to the cache, or to the pool when
// the cache is full or anyone waits.
func (qp *QueuePair) giveBlock(u int32, o int8) {
	qp.held--
	qp.heldBytes -= shareBytes(o)
	c := &qp.cache.free[o]
	if qp.pool.nwait.Load() > 0 {
		qp.pool.giveAll(o, u, &qp.cache)
		return
	}
	if len(*c) < cap(*c) {
		*c = append(*c, u)
		return
	}
	half := len(*c) / 2
	qp.pool.give(o, u, (*c)[half:])
	*c = (*c)[:half]
}

// spill returns the queue pair's cached blocks to the pool, as it goes
// idle or away.
func (qp *QueuePair) spill() {
	if qp.pool != nil && !qp.cache.empty() {
		qp.pool.giveCache(&qp.cache)
	}
}

// runGrants starts the requests the pool handed blocks to. The pool may
// take back a stopping queue pair's grants meanwhile (stop).
func (qp *QueuePair) runGrants() {
	for {
		select {
		case g := <-qp.granted:
			qp.runGrant(g)
		default:
			return
		}
	}
}

// runGrant starts the request the pool handed g to.
func (qp *QueuePair) runGrant(g grant) {
	r := &qp.reqs[g.tag]
	if r.state != stateNeedBuffer {
		// A bug: count it and give the blocks back.
		invalidTransitions.Add(1)
		qp.pool.give(g.order, g.unit, nil)
		if g.spare >= 0 {
			qp.pool.give(g.order, g.spare, nil)
		}
		return
	}
	qp.held++ // its bytes counted as it queued (takeBlock)
	r.data = g.unit
	if qp.stopping.Load() {
		qp.release(r)
	} else {
		qp.startTransfer(r)
	}
	if g.spare >= 0 {
		qp.held++
		qp.placeSpare(r, g.spare)
	}
}

// placeSpare hands the second block granted to fused first command f to
// its second: to the second waiting for it, or kept for the second to
// come, or back if the pair broke up meanwhile.
func (qp *QueuePair) placeSpare(f *request, u int32) {
	s := f.pairWait
	f.pairWait = -1
	switch {
	case s >= 0 && qp.reqs[s].state == stateNeedBuffer:
		s := &qp.reqs[s]
		s.data = u
		if qp.stopping.Load() {
			qp.release(s)
			return
		}
		qp.startTransfer(s)
	case qp.cache.pairFirst == int32(f.Tag):
		f.spare = u
	default:
		qp.giveBlock(u, f.order)
	}
}
