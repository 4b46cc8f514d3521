package rdma

import (
	"math/rand"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
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

// A block freed on one queue pair goes to the oldest request of its size
// waiting on any queue pair of the device, not to a newer one, nor to the
// freeing queue pair's cache.
func TestPoolServesWaitersInOrderAcrossQueuePairs(t *testing.T) {
	a, b := poolPair(t)
	ra := holding(t, a, maxOrder)
	first := need(b, maxOrder)
	second := need(a, maxOrder)
	waitForBlock(t, b, first)
	waitForBlock(t, a, second)
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
	useGrant(b, g, maxOrder)
	if len(a.granted) != 1 {
		t.Fatal("the second waiter got nothing once the block came back")
	}
}

// A small request waiting behind a large one gets the first block that
// fits it, until the large one has waited maxBypass: from then on it goes
// first, and newer requests of any size wait until it is served.
func TestPoolSmallOvertakeLargeUntilItAges(t *testing.T) {
	a, b := poolPair(t)
	var now time.Duration
	a.pool.now = func() time.Duration { return now }
	holder := holding(t, a, maxOrder)
	large := need(b, maxOrder)
	waitForBlock(t, b, large)
	now = a.pool.maxBypass / 2
	small := need(a, 0)
	waitForBlock(t, a, small)
	a.giveBlock(holder.data, maxOrder)
	if len(a.granted) != 1 || len(b.granted) != 0 {
		t.Fatalf("grants: small %d, large %d; want the small request through first", len(a.granted), len(b.granted))
	}
	g := <-a.granted
	a.held++
	now = a.pool.maxBypass
	later := need(a, 0)
	waitForBlock(t, a, later) // the large one waited long enough: nobody overtakes it now
	a.giveBlock(g.unit, 0)
	if len(b.granted) != 1 || len(a.granted) != 0 {
		t.Fatalf("grants: large %d, later small %d; want the aged large request first", len(b.granted), len(a.granted))
	}
	g = <-b.granted
	useGrant(b, g, maxOrder)
	if len(a.granted) != 1 {
		t.Fatal("the later small request got nothing once the large one was done")
	}
}

// A queue pair that goes away takes its waiters with it.
func TestPoolForgetsAQueuePair(t *testing.T) {
	a := stubQueuePair(t, stubSizes)
	r := holding(t, a, maxOrder)
	if a.takeBlock(need(a, maxOrder)) {
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

// poolPair is two queue pairs of one device, sharing a pool (sharedPool).
func poolPair(t *testing.T) (a, b *QueuePair) {
	a, b = stubQueuePair(t, stubSizes), stubQueuePair(t, stubSizes)
	sharedPool(a, b)
	return a, b
}

// holding is a request of qp that took a block of order o, which the
// pool must have.
func holding(t *testing.T, qp *QueuePair, o int8) *request {
	t.Helper()
	r := need(qp, o)
	if !qp.takeBlock(r) {
		t.Fatal("no block from an empty pool")
	}
	return r
}

// useGrant takes the block of order o granted to a request of qp, and
// gives it back as the request's I/O ends.
func useGrant(qp *QueuePair, g grant, o int8) {
	qp.held++
	qp.giveBlock(g.unit, o)
}

// sharedPool makes b use a's pool, as two queue pairs of one device, with
// a clock that stands still: nobody's wait ages.
func sharedPool(a, b *QueuePair) {
	b.pool = a.pool
	a.pool.now = func() time.Duration { return 0 }
}

// need is a request of qp for a block of order o.
func need(qp *QueuePair, o int8) *request {
	r := qp.takeForTest()
	r.order = o
	return r
}

// waitForBlock takes a block for r, which must find none and wait.
func waitForBlock(t *testing.T, qp *QueuePair, r *request) {
	t.Helper()
	if qp.takeBlock(r) {
		t.Fatalf("tag %d got a block out of a dry pool", r.Tag)
	}
	qp.move(r, stateNeedBuffer)
}

// A queue pair that starts stopping leaves the pool at once, before its
// teardown (which waits for the backend) forgets it: the blocks granted to
// it and not yet taken go to the waiters of live queue pairs.
func TestStoppingQueuePairLeavesThePool(t *testing.T) {
	a, b := poolPair(t)
	holder := holding(t, a, maxOrder)
	waitForBlock(t, b, need(b, 0))
	waitForBlock(t, b, need(b, 0))
	live := need(a, maxOrder)
	waitForBlock(t, a, live)
	a.giveBlock(holder.data, maxOrder)
	holder.data = -1
	if len(b.granted) != 2 || len(a.granted) != 0 {
		t.Fatalf("grants: b %d, a %d; want b's two older requests served", len(b.granted), len(a.granted))
	}
	b.Disconnect() // its poller is busy elsewhere: the grants stay unread
	if len(b.granted) != 0 || len(a.granted) != 1 || a.pool.nwait.Load() != 0 {
		t.Fatalf("after b stops: grants b %d, a %d, %d waiting; want its blocks passed to a's request",
			len(b.granted), len(a.granted), a.pool.nwait.Load())
	}
	if g := <-a.granted; g.tag != int32(live.Tag) {
		t.Fatalf("granted to tag %d, want %d", g.tag, live.Tag)
	}
}

// fusedRequest is a fused command's request of qp (nvme.FuseFirst or
// FuseSecond), a write of a block of order o.
func fusedRequest(qp *QueuePair, fuse uint8, o int8) *request {
	r := need(qp, o)
	r.Cmd.SetFlags(r.Cmd.Flags()&^nvme.FlagsFuseMask | fuse)
	r.Dir, r.Len, r.ndesc = fabrics.DirHostToCtrl, unitSize<<o, 1
	r.descs[0] = fabrics.Keyed{Addr: 4096, Len: r.Len, Key: 7}
	return r
}

// A fused pair takes its two blocks at once: with the pool dry but for
// them, another queue pair's request cannot take the second's block from
// under the pair (whose first cannot complete until its second runs), and
// the second gets it without waiting.
func TestFusedPairTakesBothBlocks(t *testing.T) {
	a, b := poolPair(t)
	holding(t, b, maxOrder-1) // half the pool
	first := fusedRequest(a, nvme.FuseFirst, maxOrder-2)
	if !a.takeBlock(first) {
		t.Fatal("the first command got no block")
	}
	waitForBlock(t, b, need(b, maxOrder-2))
	second := fusedRequest(a, nvme.FuseSecond, maxOrder-2)
	if got, waits := a.pairBlock(second); !got || waits || second.data < 0 {
		t.Fatalf("second: got %v, waits %v, block %d; want its first's second block", got, waits, second.data)
	}
	if a.held != 2 {
		t.Fatalf("queue pair holds %d blocks, want 2", a.held)
	}
}

// A pair that finds the pool dry waits for both blocks as one request; its
// second waits with it, and the grant starts both.
func TestFusedPairWaitsAsOne(t *testing.T) {
	a, b := poolPair(t)
	big := holding(t, b, maxOrder)
	first := fusedRequest(a, nvme.FuseFirst, maxOrder-1)
	waitForBlock(t, a, first)
	second := fusedRequest(a, nvme.FuseSecond, maxOrder-1)
	if got, waits := a.pairBlock(second); got || !waits {
		t.Fatalf("second: got %v, waits %v; want it waiting with its first", got, waits)
	}
	a.move(second, stateNeedBuffer)
	other := need(b, maxOrder-1)
	waitForBlock(t, b, other)
	b.giveBlock(big.data, maxOrder)
	a.runGrants()
	if first.data < 0 || second.data < 0 || first.state != stateReading || second.state != stateReadWait {
		t.Fatalf("first %v block %d, second %v block %d; want both started", first.state, first.data, second.state, second.data)
	}
	if len(b.granted) != 0 {
		t.Fatal("the other queue pair's request took half of the pair's megabyte")
	}
}

// A pool of 4 MiB and more keeps a region for small transfers: large ones
// cannot take it, and small ones still get blocks while a large one that
// waited past maxBypass holds everyone else back.
func TestPoolKeepsARegionForSmallTransfers(t *testing.T) {
	a := stubQueuePair(t, simSizes)
	a.pool = newDataPool(&memoryRegion{buf: make([]byte, minSplitPool)})
	a.cache = a.pool.newCache()
	var now time.Duration
	a.pool.now = func() time.Duration { return now }
	// Large transfers take what the main region lets them (share.go),
	// and another queue pair's, within its minShare, the rest: its next
	// waits in the pool's line.
	large := need(a, maxOrder)
	for a.takeBlock(large) {
		large = need(a, maxOrder)
	}
	a.move(large, stateNeedBuffer) // parked past its share
	b := stubQueuePair(t, simSizes)
	b.pool, b.cache = a.pool, a.pool.newCache()
	waiter := need(b, maxOrder)
	for b.takeBlock(waiter) {
		waiter = need(b, maxOrder)
	}
	b.move(waiter, stateNeedBuffer)
	if n := a.pool.nwait.Load(); n != 1 {
		t.Fatalf("%d waiting in the pool's line, want the second queue pair's 1 MiB transfer", n)
	}
	now = a.pool.maxBypass // it now goes before everyone it can
	small := need(a, 0)
	if !a.takeBlock(small) {
		t.Fatal("a 4 KiB transfer waits although the small region is free")
	}
	if small.data < a.pool.smallBase {
		t.Fatalf("4 KiB block at unit %d, outside the small region (from %d)", small.data, a.pool.smallBase)
	}
}
