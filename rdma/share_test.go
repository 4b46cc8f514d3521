package rdma

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// eightBlockPool is a pool of eight largest blocks, which qps join in
// turn.
func eightBlockPool(qps ...*QueuePair) *dataPool {
	p := newDataPool(&memoryRegion{buf: make([]byte, 8*maxBlock)})
	for _, qp := range qps {
		joinPool(p, qp)
	}
	return p
}

// joinPool has qp take its blocks from p, through a cache of its own, and
// counts its share.
func joinPool(p *dataPool, qp *QueuePair) {
	qp.pool, qp.cache = p, p.newCache()
	p.join()
}

// A queue pair that never gives its 1 MiB blocks back (a host that never
// takes its responses) holds at most max(its share, what is free past the
// reserve) of the main region, and the other queue pairs' 1 MiB transfers
// still get blocks. Its request past that waits on its own queue pair, not
// in the pool's lines, and goes once enough of its own blocks came back.
func TestQueuePairHoldsAtMostItsShare(t *testing.T) {
	hostile := stubQueuePair(t, simSizes)
	others := []*QueuePair{stubQueuePair(t, simSizes), stubQueuePair(t, simSizes)}
	p := eightBlockPool(append(others, hostile)...)
	share, reserve := p.share.Load(), p.reserve
	most := max(share, p.mainBytes()-reserve)
	t.Logf("main region %d MiB, share %.2f MiB, reserve %d MiB: a queue pair holds at most %d MiB",
		p.mainBytes()>>20, float64(share)/maxBlock, reserve>>20, most>>20)

	var held []*request
	var over *request
	for range len(hostile.reqs) {
		r := need(hostile, maxOrder)
		r.Dir, r.Len = fabrics.DirHostToCtrl, maxBlock
		if !hostile.takeBlock(r) {
			over = r
			hostile.move(r, stateNeedBuffer)
			break
		}
		held = append(held, r)
	}
	if got := hostile.heldBytes; got > most {
		t.Fatalf("one queue pair took %d MiB of the %d MiB main region, at most %d MiB allowed", got>>20, p.mainBytes()>>20, most>>20)
	}
	if over == nil || len(hostile.parked) != 1 || p.nwait.Load() != 0 {
		t.Fatalf("past its share: %d parked, %d in the pool's lines; want its request parked on its queue pair", len(hostile.parked), p.nwait.Load())
	}
	for i, qp := range others {
		if !qp.takeBlock(need(qp, maxOrder)) {
			t.Fatalf("queue pair %d found no 1 MiB block with %d MiB held by one queue pair", i, hostile.heldBytes>>20)
		}
	}

	// Its own blocks coming back let it go, within its share again.
	for len(held) > 1 {
		r := held[len(held)-1]
		held = held[:len(held)-1]
		hostile.giveBlock(r.data, r.order)
		r.data = -1
		hostile.runParked()
	}
	if len(hostile.parked) != 0 || over.state != stateReading {
		t.Fatalf("%d still parked, the request is %s, with %d MiB held; want it reading its data", len(hostile.parked), over.state, hostile.heldBytes>>20)
	}
}

// The blocks a queue pair's requests wait for in the pool's lines count
// against its share: the pool grants them later whatever the queue pair
// took meanwhile, so requests past its share park instead of queueing.
func TestWaitedForBlocksCountAgainstTheShare(t *testing.T) {
	qps := []*QueuePair{stubQueuePair(t, simSizes), stubQueuePair(t, simSizes), stubQueuePair(t, simSizes)}
	p := eightBlockPool(qps...)
	// The first two take the main region between them.
	for _, qp := range qps[:2] {
		for qp.takeBlock(need(qp, maxOrder)) {
		}
	}
	late := qps[2]
	for range len(late.reqs) {
		r := need(late, maxOrder)
		if late.takeBlock(r) {
			t.Fatalf("a block out of a main region with %d MiB free", p.mainFree()>>20)
		}
		late.move(r, stateNeedBuffer)
		if len(late.parked) > 0 {
			break
		}
	}
	if want := p.share.Load() / maxBlock; int64(p.nwait.Load()) != want {
		t.Fatalf("%d requests of the queue pair wait in the pool's lines, want its share's %d blocks", p.nwait.Load(), want)
	}
	if len(late.parked) != 1 {
		t.Fatalf("%d requests parked, want the one past the share", len(late.parked))
	}
}

// A queue pair alone on the pool leaves the reserve too: the queue pair
// that connects next streams from it, whatever the first one holds.
func TestReserveOutlastsAnEarlierQueuePair(t *testing.T) {
	first, next := stubQueuePair(t, simSizes), stubQueuePair(t, simSizes)
	p := eightBlockPool(first)
	for first.takeBlock(need(first, maxOrder)) {
	}
	joinPool(p, next)
	for i := range minShare / maxBlock {
		if !next.takeBlock(need(next, maxOrder)) {
			t.Fatalf("the queue pair that came second got %d MiB, with %d MiB held by the first: want %d MiB", i, first.heldBytes>>20, minShare>>20)
		}
	}
}

// Taking and giving a block that counts against the share allocates
// nothing either.
func BenchmarkTakeGiveSharedBlock(b *testing.B) {
	qp := stubQueuePair(b, stubSizes)
	qp.pool.join()
	r := qp.takeForTest()
	r.order = maxOrder
	b.ReportAllocs()
	for b.Loop() {
		qp.takeBlock(r)
		qp.giveBlock(r.data, r.order)
	}
}

// An I/O queue pair counts in the pool's shares from its Connect, not
// from the connection's acceptance: queue pairs that never connect
// shrink nobody's share. It leaves as it goes.
func TestQueuePairJoinsTheSharesAtConnect(t *testing.T) {
	dev := &device{
		pool: newDataPool(&memoryRegion{buf: make([]byte, maxBlock)}),
		ctl:  newDataPool(&memoryRegion{buf: make([]byte, maxBlock)}),
	}
	accepted := &QueuePair{dev: dev, qid: 1, rq: &recvRing{mem: &memoryRegion{}}}
	if err := accepted.takeMemory(recheckSizes); err != nil {
		t.Fatal(err)
	}
	if n := dev.pool.qps.Load(); n != 0 {
		t.Fatalf("an accepted queue pair not connected yet counts in the shares: %d queue pairs", n)
	}

	qp, _ := ioQueuePair(t)
	if n := qp.pool.qps.Load(); n != 1 || !qp.joined {
		t.Fatalf("after Connect: %d queue pairs in the shares (joined %v), want 1", n, qp.joined)
	}
	qp.ownRing = false // the stub ring is Go memory
	qp.freeMemory()
	if n := qp.pool.qps.Load(); n != 0 {
		t.Fatalf("after it went: %d queue pairs in the shares, want 0", n)
	}
}

// A request that comes while others of its queue pair are parked parks
// behind them, even when its queue pair may take a block again: the
// blocks that come back go to the oldest first.
func TestNewRequestsDoNotOvertakeParkedOnes(t *testing.T) {
	qp := stubQueuePair(t, simSizes)
	p := eightBlockPool(qp)
	p.join() // another queue pair's share
	var held []*request
	var older *request
	for older == nil {
		r := need(qp, maxOrder)
		r.Dir, r.Len = fabrics.DirHostToCtrl, maxBlock
		if qp.takeBlock(r) {
			held = append(held, r)
			continue
		}
		older = r
		qp.move(r, stateNeedBuffer)
	}
	for !qp.mayTake(maxBlock) {
		r := held[len(held)-1]
		held = held[:len(held)-1]
		qp.giveBlock(r.data, r.order)
		r.data = -1
	}
	newer := need(qp, maxOrder)
	newer.Dir, newer.Len = fabrics.DirHostToCtrl, maxBlock
	if qp.takeBlock(newer) {
		t.Fatalf("a new request took a block with %d older parked", len(qp.parked))
	}
	qp.move(newer, stateNeedBuffer)
	qp.runParked()
	if older.state != stateReading || newer.state != stateNeedBuffer {
		t.Fatalf("the older request is %s, the newer %s; want the older reading its data first", older.state, newer.state)
	}
}

// A fused pair of large transfers counts both its blocks against the
// share: past it, the first parks before it takes anything, its second
// waits with it, and both start once the pair fits.
func TestFusedPairParksPastTheShare(t *testing.T) {
	qp := stubQueuePair(t, simSizes)
	p := eightBlockPool(qp)
	p.join() // another queue pair's share
	var held []*request
	for qp.mayTake(2 * maxBlock) {
		r := need(qp, maxOrder)
		if !qp.takeBlock(r) {
			t.Fatal("a single block past what the pair may take")
		}
		held = append(held, r)
	}
	before := qp.heldBytes
	first := fusedRequest(qp, nvme.FuseFirst, maxOrder)
	if qp.takeBlock(first) || qp.heldBytes != before || len(qp.parked) != 1 {
		t.Fatalf("the first command past the share: %d parked, %d MiB counted (was %d MiB); want it parked holding nothing",
			len(qp.parked), qp.heldBytes>>20, before>>20)
	}
	qp.move(first, stateNeedBuffer)
	second := fusedRequest(qp, nvme.FuseSecond, maxOrder)
	if got, waits := qp.pairBlock(second); got || !waits {
		t.Fatalf("second: got %v, waits %v; want it waiting with its first", got, waits)
	}
	qp.move(second, stateNeedBuffer)
	for !qp.mayTake(2 * maxBlock) {
		r := held[len(held)-1]
		held = held[:len(held)-1]
		qp.giveBlock(r.data, r.order)
	}
	qp.runParked()
	if first.data < 0 || second.data < 0 || first.state != stateReading || second.state != stateReadWait {
		t.Fatalf("first %v block %d, second %v block %d; want both started", first.state, first.data, second.state, second.data)
	}
}
