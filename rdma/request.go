package rdma

import (
	"sync/atomic"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// reqState is where one command is in its life on the queue pair, as
// SPDK's enum spdk_nvmf_rdma_request_state. The state says who holds the
// request and its data buffer, and so what teardown must wait for: a
// request whose work requests are on the wire (stateReading,
// stateSending) is the device's until their completion is polled, even a
// flushed one.
type reqState uint8

const (
	// stateFree: on the free list; holds no buffer.
	stateFree reqState = iota
	// stateExecuting: fabrics holds it, from the capsule's arrival
	// through Prepare and Execute (on the poller or a backend worker)
	// until QueueTransport.Complete.
	stateExecuting
	// stateNeedBuffer: waits in a bufferPool for a data buffer.
	stateNeedBuffer
	// stateReadWait: holds a data buffer; its RDMA READs wait for send
	// queue credits (credits.go).
	stateReadWait
	// stateReading: its RDMA READs are posted.
	stateReading
	// stateSendWait: its response waits for send queue credits.
	stateSendWait
	// stateSending: its response (RDMA WRITEs and the SEND) is posted.
	stateSending
	numStates
)

var stateNames = [numStates]string{"free", "executing", "need_buffer", "read_wait", "reading", "send_wait", "sending"}

func (s reqState) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return "invalid"
}

// stateSet is a set of states, one bit each.
type stateSet uint16

func states(ss ...reqState) stateSet {
	var set stateSet
	for _, s := range ss {
		set |= 1 << s
	}
	return set
}

func (set stateSet) has(s reqState) bool { return set&(1<<s) != 0 }

// transitions are the moves of a live queue pair. A command needs a
// buffer only for keyed data, reads the host's data only for writes, and
// waits for credits only when the send queue is full; errors complete it
// from wherever it is fabrics'.
var transitions = [numStates]stateSet{
	stateFree:       states(stateExecuting),
	stateExecuting:  states(stateNeedBuffer, stateReadWait, stateReading, stateSendWait, stateSending),
	stateNeedBuffer: states(stateExecuting, stateReadWait, stateReading),
	stateReadWait:   states(stateReading),
	stateReading:    states(stateExecuting),
	stateSendWait:   states(stateSending),
	stateSending:    states(stateFree),
}

// teardownTransitions are the moves a stopping queue pair adds: every
// request goes back to the free list, but one on the wire only at its
// completion (drain) or when its work requests were never handed to the
// device (dropPending), and one fabrics holds only after fabrics.Queue.Close.
var teardownTransitions = [numStates]stateSet{
	stateExecuting:  states(stateFree),
	stateNeedBuffer: states(stateFree),
	stateReadWait:   states(stateFree),
	stateReading:    states(stateFree),
	stateSendWait:   states(stateFree),
}

// invalidTransitions counts state machine violations, all queue pairs
// together: each is a bug, which disconnects the queue pair it happened on.
var invalidTransitions atomic.Uint64

// InvalidTransitions is how many request state violations the transport
// saw (0 unless there is a bug).
func InvalidTransitions() uint64 { return invalidTransitions.Load() }

// request is the transport's state of one command, wrapping the fabrics
// request. It is preallocated and reused.
type request struct {
	fabrics.Request
	state      reqState
	recv       int32 // receive buffer holding the capsule, -1 once reposted
	data       int32 // first unit of the data block (pool.go), -1 if none
	order      int8  // the data block's order
	spare      int32 // a fused first command's block for its second, -1 if none
	pairWait   int32 // a fused first command's second, waiting for spare; -1 if none
	inline     []byte
	waitBuf    []byte   // in-capsule data copied out while it waited on QoS (qos.go), nil if none
	cmd        [64]byte // the command, copied out of its receive buffer
	descs      [fabrics.MaxKeyedDescriptors]fabrics.Keyed
	ndesc      int
	invalidate bool
	held       charge // send queue credits of the chain in flight
}

// move checks and makes r's transition to state to, and reports whether
// it did. An invalid one is a bug: it is counted and logged, the queue
// pair is disconnected (the host reconnects) rather than trusted further,
// and the move is refused: r stays where it is, holding what it holds, so
// that teardown takes it back by the way it really goes (a request on the
// wire only through its completion). Callers act on the new state only if
// the move was made.
func (qp *QueuePair) move(r *request, to reqState) bool {
	from := r.state
	if !transitions[from].has(to) && !(qp.stopping.Load() && teardownTransitions[from].has(to)) {
		qp.invalidTransition(r, from, to)
		return false
	}
	qp.inState[from]--
	qp.inState[to]++
	r.state = to
	return true
}

func (qp *QueuePair) invalidTransition(r *request, from, to reqState) {
	invalidTransitions.Add(1)
	qp.log.WithFields(logrus.Fields{"tag": r.Tag, "from": from, "to": to}).
		Error("request state machine violated; disconnecting the queue (the host reconnects)")
	qp.Disconnect()
}

// release returns r, its data block (pool.go hands it to the oldest
// request waiting for one, on any queue pair of the device) and, at
// teardown, its receive buffer. A request that may not go free yet keeps
// them all.
func (qp *QueuePair) release(r *request) {
	if !qp.move(r, stateFree) {
		return
	}
	qp.budget.retire(r.held)
	r.held = charge{}
	if d := r.data; d >= 0 {
		r.data = -1
		qp.giveBlock(d, r.order)
	}
	qp.dropSpare(r)
	if r.recv >= 0 {
		qp.returnRecv(r.recv) // torn down before its response
		r.recv = -1
	}
	if r.waitBuf != nil {
		qp.giveWaitBuf(r.waitBuf)
		r.waitBuf = nil
	}
	r.Data, r.inline = nil, nil
	qp.freeReqs = append(qp.freeReqs, int32(r.Tag))
}

// onWire reports whether r's work requests are posted and not completed.
func (r *request) onWire() bool { return r.state == stateReading || r.state == stateSending }

// posted reports whether r is on the wire with a chain of kind: its RDMA
// READs (kindRead) or its response (kindSend). A work request of the other
// kind is not r's chain, whatever r's state.
func (r *request) posted(kind uint64) bool {
	return kind == kindRead && r.state == stateReading || kind == kindSend && r.state == stateSending
}

// settle accounts for a failed completion of one of r's work requests, of
// kind: the queue pair is in the error state, so the chain is over and r
// goes back. Further flushed work requests of the same chain find r free.
func (qp *QueuePair) settle(r *request, kind uint64) {
	if r.posted(kind) {
		qp.release(r)
	}
}
