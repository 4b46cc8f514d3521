package rdma

// buddy is a binary buddy allocator over a region of units (4 KiB each)
// in blocks of 2^order units, order 0 to maxOrder. A transfer gets one
// block that fits its length, so r.Data stays one contiguous slice the
// backends read and write in one call, while a 4 KiB command takes 4 KiB,
// not the 1 MiB a command may move. It keeps its free lists in arrays made
// once, so allocating and freeing allocate nothing. Not safe for concurrent
// use: dataPool guards it.
type buddy struct {
	// head is the first free block of each order, -1 if none; next and
	// prev link free blocks by their first unit.
	head       [maxOrder + 1]int32
	next, prev []int32
	// freeOrder is the order of the free block starting at a unit, -1
	// where no free block starts.
	freeOrder []int8
	freeUnits int
}

const (
	unitShift = 12 // 4 KiB units: the page O_DIRECT backends need
	unitSize  = 1 << unitShift
	// maxOrder is the order of the largest block, fabrics.MaxDataTransfer.
	maxOrder = 8
	maxBlock = unitSize << maxOrder
)

// newBuddy manages units units, a multiple of the largest block's.
func newBuddy(units int) *buddy {
	b := &buddy{next: make([]int32, units), prev: make([]int32, units), freeOrder: make([]int8, units)}
	for i := range b.head {
		b.head[i] = -1
	}
	for i := range b.freeOrder {
		b.freeOrder[i] = -1
	}
	for u := 0; u+1<<maxOrder <= units; u += 1 << maxOrder {
		b.push(int32(u), maxOrder)
	}
	return b
}

// orderFor is the order of the smallest block holding n bytes (n ≤ maxBlock).
func orderFor(n uint32) int8 {
	o := int8(0)
	for unitSize<<o < int(n) {
		o++
	}
	return o
}

func (b *buddy) push(u int32, o int8) {
	b.freeOrder[u] = o
	b.prev[u], b.next[u] = -1, b.head[o]
	if h := b.head[o]; h >= 0 {
		b.prev[h] = u
	}
	b.head[o] = u
	b.freeUnits += 1 << o
}

func (b *buddy) unlink(u int32, o int8) {
	if p := b.prev[u]; p >= 0 {
		b.next[p] = b.next[u]
	} else {
		b.head[o] = b.next[u]
	}
	if n := b.next[u]; n >= 0 {
		b.prev[n] = b.prev[u]
	}
	b.freeOrder[u] = -1
	b.freeUnits -= 1 << o
}

// alloc returns the first unit of a free block of order o, or -1.
func (b *buddy) alloc(o int8) int32 {
	have := o
	for have <= maxOrder && b.head[have] < 0 {
		have++
	}
	if have > maxOrder {
		return -1
	}
	u := b.head[have]
	b.unlink(u, have)
	// Split down to o, freeing the upper halves.
	for have > o {
		have--
		b.push(u+1<<have, have)
	}
	return u
}

// free returns block u of order o, merging it with its free buddies.
func (b *buddy) free(u int32, o int8) {
	for o < maxOrder {
		bud := u ^ 1<<o
		if int(bud) >= len(b.freeOrder) || b.freeOrder[bud] != o {
			break
		}
		b.unlink(bud, o)
		u = min(u, bud)
		o++
	}
	b.push(u, o)
}
