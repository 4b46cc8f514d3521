package rdma

import (
	"io"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// stubQueuePair is a queue pair without verbs: its requests and buffers
// are carved from Go memory, its batch is C memory, and a disconnect only
// marks it stopping. Enough for the state machine and teardown accounting.
func stubQueuePair(t testing.TB, sz queueSizes) *QueuePair {
	t.Helper()
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	qp := &QueuePair{log: logrus.NewEntry(logger), discDone: true, eventfd: -1, ownRing: true}
	qp.rq = &recvRing{mem: &memoryRegion{lkey: 3}}
	for range sz.depth {
		qp.rq.cmd = append(qp.rq.cmd, make([]byte, 64))
		qp.rq.inline = append(qp.rq.inline, make([]byte, sz.inline))
	}
	qp.pool = newDataPool(&memoryRegion{buf: make([]byte, maxBlock), lkey: 1})
	qp.ctl = newDataPool(&memoryRegion{buf: make([]byte, maxBlock), lkey: 2})
	qp.rspOrder = orderFor(uint32(sz.nreq * 16))
	qp.rspUnit = qp.ctl.alloc(qp.rspOrder)
	qp.carve(sz)
	var err error
	if qp.wrs, qp.wrsPtr, err = newBatch(3*sz.nreq + 3*pollBatch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { freeBatch(qp.wrs, qp.wrsPtr) })
	qp.budget = newSendBudget(sz.sendWR, 1, sz.nreq)
	return qp
}

var stubSizes = queueSizes{depth: 2, nreq: 4, sendWR: 64, recvWR: 2, cqe: 66, maxRead: 1}

// takeForTest pops a free request and moves it to executing, as a received
// capsule does.
func (qp *QueuePair) takeForTest() *request {
	r := &qp.reqs[qp.freeReqs[len(qp.freeReqs)-1]]
	qp.freeReqs = qp.freeReqs[:len(qp.freeReqs)-1]
	qp.move(r, stateExecuting)
	return r
}

// The paths a command takes on a live queue pair, as the poller drives
// them.
var livePaths = map[string][]reqState{
	"no data":                {stateExecuting, stateSending, stateFree},
	"read":                   {stateExecuting, stateSending, stateFree},
	"write":                  {stateExecuting, stateReading, stateExecuting, stateSending, stateFree},
	"write waiting credits":  {stateExecuting, stateReadWait, stateReading, stateExecuting, stateSendWait, stateSending, stateFree},
	"read waiting a buffer":  {stateExecuting, stateNeedBuffer, stateExecuting, stateSending, stateFree},
	"write waiting a buffer": {stateExecuting, stateNeedBuffer, stateReadWait, stateReading, stateExecuting, stateSending, stateFree},
	"fails before data":      {stateExecuting, stateSendWait, stateSending, stateFree},
}

func TestLivePathsAreValid(t *testing.T) {
	for name, path := range livePaths {
		t.Run(name, func(t *testing.T) {
			qp := stubQueuePair(t, stubSizes)
			before := InvalidTransitions()
			r := &qp.reqs[0]
			for _, s := range path {
				qp.move(r, s)
			}
			if n := InvalidTransitions() - before; n != 0 || qp.stopping.Load() {
				t.Fatalf("%d invalid transitions, stopping %v", n, qp.stopping.Load())
			}
			if qp.inState[stateFree] != int32(stubSizes.nreq) {
				t.Fatalf("%d requests free, want %d", qp.inState[stateFree], stubSizes.nreq)
			}
		})
	}
}

// An invalid transition is counted and disconnects the queue pair, and
// is refused: the request stays where it was. It never panics. Teardown
// moves are invalid while the queue pair is live.
func TestInvalidTransitionsAreCounted(t *testing.T) {
	for _, c := range []struct{ from, to reqState }{
		{stateFree, stateSending},
		{stateFree, stateReading},
		{stateReading, stateSending}, // the READs' data never executed
		{stateSending, stateExecuting},
		{stateExecuting, stateFree}, // fabrics still holds it
		{stateReading, stateFree},   // the device still writes into its buffer
	} {
		t.Run(c.from.String()+"→"+c.to.String(), func(t *testing.T) {
			qp := stubQueuePair(t, stubSizes)
			r := &qp.reqs[0]
			qp.inState[stateFree]--
			qp.inState[c.from]++
			r.state = c.from
			before, states := InvalidTransitions(), qp.inState
			qp.move(r, c.to)
			if InvalidTransitions()-before != 1 || !qp.stopping.Load() {
				t.Fatalf("counted %d, stopping %v; want 1 and a disconnect", InvalidTransitions()-before, qp.stopping.Load())
			}
			if r.state != c.from || qp.inState != states {
				t.Fatalf("request moved to %v (states %v); want it left %v", r.state, qp.inState, c.from)
			}
		})
	}
}

// A stopping queue pair takes back every request, and the buffers of
// those on the wire only through their completion: a request left
// executing by fabrics, one waiting for a buffer and one whose response
// was never posted all come home, buffers included.
func TestTeardownAccountsForEveryRequest(t *testing.T) {
	qp := stubQueuePair(t, stubSizes)
	executing := qp.takeForTest()
	qp.takeBlock(executing)
	waiting := qp.takeForTest()
	waiting.data = -1
	qp.move(waiting, stateNeedBuffer)
	sending := qp.takeForTest()
	qp.takeBlock(sending)
	qp.Complete(&sending.Request)
	if sending.state != stateSending || qp.nwr == 0 {
		t.Fatalf("response in state %v with %d work requests batched", sending.state, qp.nwr)
	}
	before := InvalidTransitions()
	qp.stopping.Store(true)
	qp.flushPosts() // dropped, never posted: the response will see no completion
	if sending.state != stateFree {
		t.Fatalf("request whose response was dropped is %v, want free", sending.state)
	}
	if qp.accounted() {
		t.Fatal("accounted while a request is still executing")
	}
	qp.releaseAll()
	if !qp.accounted() || InvalidTransitions() != before {
		t.Fatalf("after teardown: accounted %v, %d invalid transitions, states %v",
			qp.accounted(), InvalidTransitions()-before, qp.inState)
	}
}

// Live, a freed buffer goes to the oldest request waiting for one; a
// failed completion settles the request whose chain it ended.
func TestReleaseHandsBufferOnAndSettles(t *testing.T) {
	qp := stubQueuePair(t, stubSizes) // a pool of one largest block
	a := holding(t, qp, maxOrder)
	qp.Complete(&a.Request)
	b := qp.takeForTest()
	b.Dir, b.Len, b.ndesc, b.order = fabrics.DirHostToCtrl, 512, 1, maxOrder
	b.descs[0] = fabrics.Keyed{Addr: 4096, Len: 512, Key: 7}
	if qp.takeBlock(b) {
		t.Fatal("second block out of a pool of one")
	}
	qp.move(b, stateNeedBuffer)
	qp.onSendDone(a)
	qp.runGrants()
	if a.state != stateFree || b.data < 0 || b.state != stateReading {
		t.Fatalf("after the send: a %v, b %v with buffer %d; want b reading the host's data", a.state, b.state, b.data)
	}
	qp.stopping.Store(true) // as completionFailed's Disconnect does
	qp.settle(b, kindRead)
	qp.settle(b, kindRead) // a second flushed work request of the same chain
	if b.state != stateFree || !qp.accounted() {
		t.Fatalf("after a failed completion: b %v, accounted %v", b.state, qp.accounted())
	}
}

// readingRequest is a write whose RDMA READ is posted: on the wire, its
// buffer the device's until the READ completes.
func readingRequest(t *testing.T, qp *QueuePair) *request {
	t.Helper()
	r := qp.takeForTest()
	r.Dir, r.Len, r.ndesc, r.order = fabrics.DirHostToCtrl, 512, 1, 0
	r.descs[0] = fabrics.Keyed{Addr: 4096, Len: 512, Key: 7}
	if !qp.takeBlock(r) {
		t.Fatal("no block from an empty pool")
	}
	qp.startTransfer(r)
	if r.state != stateReading {
		t.Fatalf("write in state %v, want reading", r.state)
	}
	qp.nwr = 0 // as if posted
	return r
}

// Fabrics completing a command whose RDMA READ is still in flight is
// refused: counted, the queue pair disconnected, and the request keeps its
// state, buffer and read credit until the READ's own completion takes it
// back, so that its buffer never goes to another request while the device
// writes into it.
func TestCompleteWhileReadingIsRefused(t *testing.T) {
	qp := stubQueuePair(t, stubSizes)
	r := readingRequest(t, qp)
	held, data, before := r.held, r.data, InvalidTransitions()
	qp.Complete(&r.Request)
	if r.state != stateReading || r.held != held || r.data != data || qp.nwr != 0 {
		t.Fatalf("after Complete: %v holding %+v, block %d, %d work requests batched; want it left reading",
			r.state, r.held, r.data, qp.nwr)
	}
	if InvalidTransitions()-before != 1 || !qp.stopping.Load() {
		t.Fatalf("counted %d, stopping %v; want 1 and a disconnect", InvalidTransitions()-before, qp.stopping.Load())
	}
	qp.onReadDone(r) // the READ completes (flushed or not) while draining
	if r.state != stateFree || !qp.accounted() || qp.budget.reads != 0 || qp.budget.slots != 0 {
		t.Fatalf("after the READ: %v, accounted %v, budget %d reads %d slots", r.state, qp.accounted(), qp.budget.reads, qp.budget.slots)
	}
}

// A failed completion frees a request only if it ends the chain the
// request is on the wire with: a stray SEND completion for a request
// whose READ is in flight leaves it, and its buffer, to the READ.
func TestSettleOnlyItsOwnChain(t *testing.T) {
	qp := stubQueuePair(t, stubSizes)
	r := readingRequest(t, qp)
	qp.stopping.Store(true)
	qp.settle(r, kindSend)
	if r.state != stateReading || r.data < 0 {
		t.Fatalf("a SEND's failure freed a reading request: %v, block %d", r.state, r.data)
	}
	qp.settle(r, kindRead)
	if r.state != stateFree || !qp.accounted() {
		t.Fatalf("the READ's failure left it %v, accounted %v", r.state, qp.accounted())
	}
}
