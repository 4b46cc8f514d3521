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
type Pool struct {
	limit atomic.Int64
	used  atomic.Int64
	sizes [numClasses]sync.Pool // *[]byte of each class

	waiters  atomic.Int32 // len(waiting), read without mu by put
	mu       sync.Mutex
	waiting  []*Conn
	lentPeak atomic.Int64
}

const (
	minClassShift = 12 // 4 KiB
	maxClassShift = 20 // 1 MiB: the largest transfer (MDTS)
	numClasses    = maxClassShift - minClassShift + 1
	// MaxBuffer is the largest buffer the pool lends.
	MaxBuffer = 1 << maxClassShift
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

// class is the size class of an n-byte buffer.
func class(n uint32) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len32(n-1) - minClassShift
}

// get lends a buffer of at least n bytes (n <= MaxBuffer), or nil if the
// pool is at its limit.
func (p *Pool) get(n uint32) *[]byte {
	c := class(n)
	size := int64(1) << (c + minClassShift)
	if used := p.used.Add(size); used > p.limit.Load() {
		p.used.Add(-size)
		return nil
	} else if used > p.lentPeak.Load() {
		p.lentPeak.Store(used)
	}
	if b, ok := p.sizes[c].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, size)
	return &b
}

// put takes a buffer back and wakes the connections waiting for one.
func (p *Pool) put(b *[]byte) {
	c := class(uint32(len(*b)))
	p.sizes[c].Put(b)
	p.used.Add(-int64(len(*b)))
	if p.waiters.Load() > 0 {
		p.wakeWaiters()
	}
}

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
