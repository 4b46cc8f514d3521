package rdma

import (
	"math/rand"
	"testing"
)

// Random allocations and frees never hand out overlapping blocks, and
// once everything is back the free blocks merge into whole largest ones.
func TestBuddyNeverOverlapsAndMerges(t *testing.T) {
	const units = 4 << maxOrder
	b := newBuddy(units)
	owner := make([]int, units) // 0 free, else allocation id
	type blk struct {
		u int32
		o int8
	}
	var live []blk
	rng := rand.New(rand.NewSource(1))
	for i := 1; i < 20000; i++ {
		if len(live) > 0 && rng.Intn(2) == 0 {
			k := rng.Intn(len(live))
			x := live[k]
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
			for j := x.u; j < x.u+1<<x.o; j++ {
				owner[j] = 0
			}
			b.free(x.u, x.o)
			continue
		}
		o := int8(rng.Intn(maxOrder + 1))
		u := b.alloc(o)
		if u < 0 {
			continue
		}
		if u%(1<<o) != 0 {
			t.Fatalf("block of order %d at unit %d is not aligned", o, u)
		}
		for j := u; j < u+1<<o; j++ {
			if owner[j] != 0 {
				t.Fatalf("unit %d handed out twice (allocations %d and %d)", j, owner[j], i)
			}
			owner[j] = i
		}
		live = append(live, blk{u, o})
	}
	for _, x := range live {
		b.free(x.u, x.o)
	}
	if b.freeUnits != units {
		t.Fatalf("%d of %d units free after everything came back", b.freeUnits, units)
	}
	for o := int8(0); o < maxOrder; o++ {
		if b.head[o] >= 0 {
			t.Fatalf("free blocks of order %d left unmerged", o)
		}
	}
	for range 4 {
		if b.alloc(maxOrder) < 0 {
			t.Fatal("whole blocks missing after merging")
		}
	}
}

func TestOrderFor(t *testing.T) {
	for _, c := range []struct {
		n    uint32
		want int8
	}{{1, 0}, {4096, 0}, {4097, 1}, {8192, 1}, {128 << 10, 5}, {1 << 20, maxOrder}} {
		if got := orderFor(c.n); got != c.want {
			t.Errorf("orderFor(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// A block freed on one queue pair goes to the oldest request waiting on
// any queue pair of the device, not to a newer one, nor to the freeing
// queue pair's cache.
func TestPoolServesWaitersInOrderAcrossQueuePairs(t *testing.T) {
	a := stubQueuePair(t, stubSizes)
	b := stubQueuePair(t, stubSizes)
	b.pool = a.pool // one device
	ra := a.takeForTest()
	ra.order = maxOrder
	if !a.takeBlock(ra) {
		t.Fatal("no block from an empty pool")
	}
	first := b.takeForTest()
	first.order = maxOrder
	second := a.takeForTest()
	second.order = 0
	if b.takeBlock(first) || a.takeBlock(second) {
		t.Fatal("a block out of a dry pool")
	}
	b.move(first, stateNeedBuffer)
	a.move(second, stateNeedBuffer)
	if got := a.pool.waits.Load(); got != 2 {
		t.Fatalf("%d waits counted, want 2", got)
	}
	a.giveBlock(ra.data, ra.order)
	ra.data = -1
	if len(b.granted) != 1 || len(a.granted) != 0 {
		t.Fatalf("grants: b %d, a %d; want the block for b's older request", len(b.granted), len(a.granted))
	}
	g := <-b.granted
	if g.tag != int32(first.Tag) {
		t.Fatalf("granted to tag %d, want %d", g.tag, first.Tag)
	}
	b.held++
	b.giveBlock(g.unit, maxOrder)
	if len(a.granted) != 1 {
		t.Fatal("the second waiter got nothing once the block came back")
	}
}

// A queue pair that goes away takes its waiters with it.
func TestPoolForgetsAQueuePair(t *testing.T) {
	a := stubQueuePair(t, stubSizes)
	r := a.takeForTest()
	r.order = maxOrder
	a.takeBlock(r)
	w := a.takeForTest()
	w.order = maxOrder
	if a.takeBlock(w) {
		t.Fatal("a block out of a dry pool")
	}
	a.pool.forget(a)
	a.giveBlock(r.data, maxOrder)
	if len(a.granted) != 0 || a.pool.nwait.Load() != 0 {
		t.Fatal("a forgotten waiter was served")
	}
	a.spill()
	if a.pool.inUse.Load() != 0 {
		t.Fatalf("%d bytes in use after everything came back", a.pool.inUse.Load())
	}
}

// Taking and giving a data block on the hot path allocates nothing.
func BenchmarkTakeGiveBlock(b *testing.B) {
	qp := stubQueuePair(b, stubSizes)
	r := qp.takeForTest()
	r.order = 1
	b.ReportAllocs()
	for b.Loop() {
		qp.takeBlock(r)
		qp.giveBlock(r.data, r.order)
	}
}
