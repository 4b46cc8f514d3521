package tcp

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Pool is the data buffer memory shared by a daemon's TCP connections:
// buffers of 4 KiB to 1 MiB (powers of two), at most Limit bytes of them
// lent out at once. A command the pool cannot serve waits for a buffer to
// come back, on any connection, and never fails.
//
// No connection can hold the others up. Each I/O queue's gets a share of
// the pool (share): a connection over its share borrows only while no other
// connection waits for a buffer within its own share. And a reserve at the
// top of the pool (reserve) is for admin commands and small transfers
// only, so that Identify and a 4 KiB read proceed while large transfers
// hold the rest. A host that pins what it borrowed by never sending the
// data or never reading the responses loses its connection after the data
// timeout (SetDataTimeout), which gives the buffers back.
type Pool struct {
	limit    atomic.Int64
	used     atomic.Int64
	conns    atomic.Int32          // connections of I/O queues: the pool is shared among them
	starving atomic.Int32          // connections waiting for a buffer within their share
	sizes    [numClasses]sync.Pool // *[]byte of each class

	// made counts the buffers allocated: a size's first use, or one
	// the runtime's sync.Pool let go (at a garbage collection, or a
	// quarter of them under the race detector).
	made atomic.Int64

	waiters  atomic.Int32 // len(waiting), read without mu by put
	mu       sync.Mutex
	waiting  []*Conn
	lentPeak atomic.Int64
}

// account is one connection's part of the pool, kept by its poller.
type account struct {
	held     int64 // bytes lent to the connection now
	over     int64 // of them, bytes lent past the limit (getOver)
	starving bool  // counted in Pool.starving
}

const (
	minClassShift = 12 // 4 KiB
	maxClassShift = 20 // 1 MiB: the largest transfer (MDTS)
	numClasses    = maxClassShift - minClassShift + 1
	// MaxBuffer is the largest buffer the pool lends.
	MaxBuffer = 1 << maxClassShift

	// smallTransfer is the largest transfer the reserve serves: the 4 KiB
	// to 16 KiB of metadata and database I/O, whose latency a stream of
	// 1 MiB transfers must not set.
	smallTransfer = 16 << 10
	// maxReserve bounds the reserve: 256 small transfers in flight.
	maxReserve = 4 << 20
	// minShare is the least share of a connection: two transfers of the
	// largest size, one receiving its data while the other executes, so
	// that a connection streams at full size however many share the pool.
	minShare = 2 * MaxBuffer
	// maxOver bounds what one connection holds past the limit, for
	// in-capsule data that arrives while its R2Ts are outstanding: 256
	// capsules of 8 KiB, past a queue's depth of them at the usual
	// in-capsule size, yet a host that keeps an R2T open and sends
	// capsules cannot grow the pool without end.
	maxOver = minShare
)

// DefaultPoolBytes is the pool's size unless configured: 64 MiB, the data
// of 64 commands of the largest size, or 16384 of 4 KiB, in flight at once.
const DefaultPoolBytes = 64 << 20

// NewPool makes a pool of limit bytes (at least MaxBuffer).
func NewPool(limit int64) *Pool {
	p := &Pool{}
	p.SetLimit(limit)
	return p
}

// SetLimit resizes the pool to limit bytes (at least MaxBuffer). Buffers
// lent stay lent; a larger pool wakes the commands waiting for one.
func (p *Pool) SetLimit(limit int64) {
	if p.limit.Swap(max(limit, MaxBuffer)) < limit && p.waiters.Load() > 0 {
		p.wakeWaiters()
	}
}

// reserve is the part of a pool of limit bytes that only admin commands
// and small transfers take: a sixteenth, at most maxReserve, and never so
// much that a transfer of MaxBuffer cannot be served.
func reserve(limit int64) int64 { return max(0, min(limit/16, maxReserve, limit-MaxBuffer)) }

// share is what each connection may hold while others wait: the pool
// past the reserve split evenly, at least minShare. With more connections
// than fit minShare each, the shares overcommit the pool and what is left
// of the promise is that connections within their share come first.
func (p *Pool) share(limit int64) int64 {
	return max((limit-reserve(limit))/int64(max(p.conns.Load(), 1)), minShare)
}

// class is the size class of an n-byte buffer.
func class(n uint32) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len32(n-1) - minClassShift
}

func classSize(n uint32) int64 { return int64(1) << (class(n) + minClassShift) }

// get lends a buffer of at least n bytes (n <= MaxBuffer) to the
// connection of a, or returns nil: the pool is at its limit (the reserve
// counts for large transfers only), or a is over its share while another
// connection waits within its own. small is an admin command's or a
// transfer of at most smallTransfer.
func (p *Pool) get(n uint32, a *account, small bool) *[]byte {
	c := class(n)
	size := int64(1) << (c + minClassShift)
	limit := p.limit.Load()
	if p.starving.Load() > 0 && a.held+size > p.share(limit) {
		return nil
	}
	room := limit
	if !small {
		room -= reserve(limit)
	}
	used := p.used.Add(size)
	if used > room {
		p.used.Add(-size)
		return nil
	}
	return p.lend(c, size, used, a)
}

// getOver lends a buffer of at least n bytes past the limit if need be,
// for in-capsule data that cannot wait (inCapsuleBuffer), or returns nil
// once a's connection holds maxOver bytes so lent. The buffer goes back
// with putOver.
func (p *Pool) getOver(n uint32, a *account) *[]byte {
	c := class(n)
	size := int64(1) << (c + minClassShift)
	if a.over+size > maxOver {
		return nil
	}
	a.over += size
	return p.lend(c, size, p.used.Add(size), a)
}

// lend hands out a buffer of class c, size bytes, already counted in
// used, which is the pool's count with it.
func (p *Pool) lend(c int, size, used int64, a *account) *[]byte {
	if used > p.lentPeak.Load() {
		p.lentPeak.Store(used)
	}
	a.held += size
	if b, ok := p.sizes[c].Get().(*[]byte); ok {
		return b
	}
	p.made.Add(1)
	b := make([]byte, size)
	return &b
}

// put takes a buffer of a's connection back and wakes the connections
// waiting for one.
func (p *Pool) put(b *[]byte, a *account) {
	c := class(uint32(len(*b)))
	p.sizes[c].Put(b)
	p.used.Add(-int64(len(*b)))
	a.held -= int64(len(*b))
	if p.waiters.Load() > 0 {
		p.wakeWaiters()
	}
}

// putOver is put for a buffer that getOver lent.
func (p *Pool) putOver(b *[]byte, a *account) {
	a.over -= int64(len(*b))
	p.put(b, a)
}

// waitingFor records whether a's connection waits for a buffer of n
// bytes (0: it waits for none) within its share. While any connection
// does, connections over their share borrow nothing more; when the last
// one stops, those that were refused are woken.
func (p *Pool) waitingFor(a *account, n uint32) {
	starving := n > 0 && a.held+classSize(n) <= p.share(p.limit.Load())
	if starving == a.starving {
		return
	}
	a.starving = starving
	if starving {
		p.starving.Add(1)
	} else if p.starving.Add(-1) == 0 && p.waiters.Load() > 0 {
		p.wakeWaiters()
	}
}

// join counts an I/O queue's connection in the shares.
func (p *Pool) join() { p.conns.Add(1) }

// leave is join's undo, once the connection gave back all it held and
// waits for nothing (waitingFor 0).
func (p *Pool) leave() { p.conns.Add(-1) }

// wait registers c to be woken when a buffer comes back. The caller tries
// get once more afterwards: a put between its failed get and wait has
// seen no waiter.
func (p *Pool) wait(c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.waiting {
		if w == c {
			return
		}
	}
	p.waiting = append(p.waiting, c)
	p.waiters.Store(int32(len(p.waiting)))
}

// forget removes a closing connection from the waiters.
func (p *Pool) forget(c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, w := range p.waiting {
		if w == c {
			p.waiting = append(p.waiting[:i], p.waiting[i+1:]...)
			break
		}
	}
	p.waiters.Store(int32(len(p.waiting)))
}

func (p *Pool) wakeWaiters() {
	p.mu.Lock()
	ws := p.waiting
	p.waiting = nil
	p.waiters.Store(0)
	p.mu.Unlock()
	for _, c := range ws {
		c.poolWake()
	}
}

// Lent is the buffer memory lent out now; Peak the most ever.
func (p *Pool) Lent() int64 { return p.used.Load() }

// Peak is the most buffer memory ever lent out at once.
func (p *Pool) Peak() int64 { return p.lentPeak.Load() }

// Limit is the pool's size.
func (p *Pool) Limit() int64 { return p.limit.Load() }
