package rdma

import (
	"sync"
	"sync/atomic"
)

// dataPool is a device's data buffers: one region, registered when the
// first port listens on the device, that every queue pair on the device
// draws its transfers from. Registered memory so follows the I/O in
// flight, not the number of queues connected (as SPDK's shared buffer
// pool; nvmet allocates per command instead).
//
// A request that finds the pool dry waits its turn: waiting is first come,
// first served across the device, and the block that frees up goes straight
// to the oldest waiter, on whichever queue pair it is, whose poller is woken
// to run it. Nothing fails for want of a buffer.
//
// Each queue pair keeps a few free blocks of each order (qpCache) so that
// most takes and gives touch no lock another queue contends. The caches
// spill back when a queue pair goes idle, and are bypassed while anyone
// waits, so an idle queue pair never starves a busy one.
type dataPool struct {
	mem *memoryRegion

	mu      sync.Mutex
	b       *buddy
	waiters []waiter // oldest first

	nwait atomic.Int32 // len(waiters), read without mu on the hot path
	inUse atomic.Int64 // bytes out of the buddy: held by requests or in caches
	waits atomic.Uint64
}

// waiter is a request waiting for a block.
type waiter struct {
	qp    *QueuePair
	tag   int32
	order int8
}

// grant hands a block to a waiting request of a queue pair.
type grant struct{ tag, unit int32 }

func newDataPool(mem *memoryRegion) *dataPool {
	return &dataPool{mem: mem, b: newBuddy(len(mem.buf) >> unitShift)}
}

// block is the memory of block u, n bytes of it.
func (p *dataPool) block(u int32, n uint32) []byte {
	off := int(u) << unitShift
	return p.mem.buf[off : off+int(n) : off+int(n)]
}

func (p *dataPool) size() int64 { return int64(len(p.mem.buf)) }

// take allocates a block of order o, filling cache with up to batch more.
// It returns -1, and queues the request as a waiter, if none is free or
// others wait already.
func (p *dataPool) take(qp *QueuePair, tag int32, o int8, cache *[]int32, batch int) int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waiters) == 0 {
		if u := p.b.alloc(o); u >= 0 {
			for range batch {
				c := p.b.alloc(o)
				if c < 0 {
					break
				}
				*cache = append(*cache, c)
			}
			p.account()
			return u
		}
	}
	p.waiters = append(p.waiters, waiter{qp: qp, tag: tag, order: o})
	p.nwait.Store(int32(len(p.waiters)))
	p.waits.Add(1)
	return -1
}

// alloc allocates a block of order o, or returns -1; nobody waits for it.
func (p *dataPool) alloc(o int8) int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.b.alloc(o)
	p.account()
	return u
}

// give returns block u and units, all of order o, and serves the waiters
// they make room for.
func (p *dataPool) give(o int8, u int32, units []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.b.free(u, o)
	for _, u := range units {
		p.b.free(u, o)
	}
	p.serve()
	p.account()
}

// giveCache returns every block of a queue pair's cache.
func (p *dataPool) giveCache(c *qpCache) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for o := range c {
		for _, u := range c[o] {
			p.b.free(u, int8(o))
		}
		c[o] = c[o][:0]
	}
	p.serve()
	p.account()
}

// serve hands free blocks to the oldest waiters, in order, until the
// oldest does not fit. Called with mu held.
func (p *dataPool) serve() {
	n := 0
	for n < len(p.waiters) {
		w := p.waiters[n]
		u := p.b.alloc(w.order)
		if u < 0 {
			break
		}
		w.qp.granted <- grant{tag: w.tag, unit: u} // never full: one grant per request
		w.qp.Wake()
		n++
	}
	if n > 0 {
		copy(p.waiters, p.waiters[n:])
		clear(p.waiters[len(p.waiters)-n:])
		p.waiters = p.waiters[:len(p.waiters)-n]
		p.nwait.Store(int32(len(p.waiters)))
	}
}

// forget drops qp's waiters: it is going, and grants after this would
// find nobody to run.
func (p *dataPool) forget(qp *QueuePair) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.waiters[:0]
	for _, w := range p.waiters {
		if w.qp != qp {
			kept = append(kept, w)
		}
	}
	clear(p.waiters[len(kept):])
	p.waiters = kept
	p.nwait.Store(int32(len(p.waiters)))
}

func (p *dataPool) account() {
	p.inUse.Store(p.size() - int64(p.b.freeUnits)<<unitShift)
}

// qpCache is a queue pair's free blocks of each order.
type qpCache [maxOrder + 1][]int32

// cacheSize is how many blocks of order o a queue pair keeps: enough
// 4 KiB blocks for a burst, one of the largest.
func cacheSize(o int8) int { return max(1, 16>>(o/2)) }

func newQPCache() qpCache {
	var c qpCache
	for o := range c {
		c[o] = make([]int32, 0, cacheSize(int8(o)))
	}
	return c
}

func (c *qpCache) empty() bool {
	for o := range c {
		if len(c[o]) > 0 {
			return false
		}
	}
	return true
}

// takeBlock gives r a data block of r.order, from the queue pair's cache
// or the pool. It returns false if r now waits for a grant.
func (qp *QueuePair) takeBlock(r *request) bool {
	c := &qp.cache[r.order]
	if len(*c) > 0 && qp.pool.nwait.Load() == 0 {
		r.data = (*c)[len(*c)-1]
		*c = (*c)[:len(*c)-1]
		qp.held++
		return true
	}
	u := qp.pool.take(qp, int32(r.Tag), r.order, c, cap(*c)/2-len(*c))
	if u < 0 {
		return false
	}
	r.data = u
	qp.held++
	return true
}

// giveBlock returns block u of order o: to the cache, or to the pool when
// the cache is full or anyone waits.
func (qp *QueuePair) giveBlock(u int32, o int8) {
	qp.held--
	if qp.pool.nwait.Load() > 0 {
		qp.cache[o] = append(qp.cache[o], u)
		qp.pool.giveCache(&qp.cache)
		return
	}
	c := &qp.cache[o]
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

// runGrants starts the requests the pool handed blocks to.
func (qp *QueuePair) runGrants() {
	for len(qp.granted) > 0 {
		g := <-qp.granted
		r := &qp.reqs[g.tag]
		if r.state != stateNeedBuffer {
			// A bug: count it and give the block back.
			invalidTransitions.Add(1)
			qp.pool.give(r.order, g.unit, nil)
			continue
		}
		qp.held++
		r.data = g.unit
		if qp.stopping.Load() {
			qp.release(r)
			continue
		}
		qp.startTransfer(r)
	}
}
