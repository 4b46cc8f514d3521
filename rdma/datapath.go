package rdma

/*
#include <stdlib.h>
#include "verbs.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// The poller's side of one command: each completion moves its request
// through the state machine of request.go.

func (qp *QueuePair) handle(wc *C.struct_nt_wc) {
	id := uint64(wc.wr_id)
	idx := int32(id &^ kindMask)
	if debugWC {
		qp.log.Debugf("wc id=%#x status=%d opcode=%d len=%d", id, wc.status, wc.opcode, wc.byte_len)
	}
	if wc.status != C.IBV_WC_SUCCESS {
		qp.completionFailed(wc)
		return
	}
	switch id & kindMask {
	case kindRecv:
		qp.onRecv(idx, int(wc.byte_len))
	case kindRead:
		qp.onReadDone(&qp.reqs[idx])
	case kindSend:
		qp.onSendDone(&qp.reqs[idx])
	}
}

// completionFailed disconnects the queue on a failed work request. Only
// the first failure is worth a warning: once the queue pair is in the
// error state the device flushes every other posted work request.
func (qp *QueuePair) completionFailed(wc *C.struct_nt_wc) {
	level := completionLogLevel(wc.status == C.IBV_WC_WR_FLUSH_ERR, qp.stopping.Load(), qp.failed)
	qp.failed = true
	if qp.log.Logger.IsLevelEnabled(level) {
		qp.log.WithFields(logrus.Fields{
			"status": C.GoString(C.ibv_wc_status_str(C.enum_ibv_wc_status(wc.status))), "vendor_err": uint32(wc.vendor_err),
		}).Log(level, "work request failed; disconnecting the queue (the host reconnects)")
	}
	qp.Disconnect()
	// The queue pair is in the error state: the request's chain is over.
	switch id := uint64(wc.wr_id); id & kindMask {
	case kindRead, kindSend:
		qp.settle(&qp.reqs[id&^kindMask], id&kindMask)
	case kindRecv:
		qp.returnRecv(int32(id &^ kindMask))
	}
}

// completionLogLevel is how loud a failed completion is: a warning for the
// first real error of a queue, debug for flushes (they follow an error or
// a disconnect, which is logged already) and for anything at teardown.
func completionLogLevel(flush, stopping, failedBefore bool) logrus.Level {
	if flush || stopping || failedBefore {
		return logrus.DebugLevel
	}
	return logrus.WarnLevel
}

func (qp *QueuePair) onRecv(ri int32, n int) {
	if qp.stopping.Load() {
		qp.returnRecv(ri) // the queue is going: no new command starts
		return
	}
	if n < nvme.CommandSize {
		qp.log.WithField("bytes", n).Warn("capsule shorter than a command; disconnecting the queue")
		qp.returnRecv(ri)
		qp.Disconnect()
		return
	}
	if len(qp.freeReqs) == 0 {
		qp.overrun()
		qp.returnRecv(ri)
		qp.Disconnect()
		return
	}
	r := &qp.reqs[qp.freeReqs[len(qp.freeReqs)-1]]
	qp.freeReqs = qp.freeReqs[:len(qp.freeReqs)-1]
	r.data, r.invalidate, r.ndesc, r.pairWait = -1, false, 0, -1
	// The command is copied out, so a capsule without in-capsule data
	// gives its receive buffer back at once: a command that waits long
	// (an Asynchronous Event Request) holds no receive buffer.
	copy(r.cmd[:], qp.rq.cmd[ri])
	r.Cmd = nvme.Command(r.cmd[:])
	if n == nvme.CommandSize {
		r.recv, r.inline = -1, nil
		qp.postRecv(ri)
	} else {
		r.recv, r.inline = ri, qp.rq.inline[ri][:n-nvme.CommandSize]
	}
	if !qp.move(r, stateExecuting) {
		qp.freeReqs = append(qp.freeReqs, int32(r.Tag))
		qp.returnRecv(ri)
		return
	}
	if qp.fq.Prepare(&r.Request) {
		qp.mapData(r)
	} else if r.state == stateExecuting && r.recv >= 0 {
		// Not completed, so it waits on its namespace's QoS limit.
		qp.letGoOfRecv(r)
	}
	qp.endPair(r)
}

// returnRecv gives back a receive buffer no command uses: to the shared
// receive queue, which outlives the queue pair. A queue pair's own ring
// goes with it.
func (qp *QueuePair) returnRecv(ri int32) {
	if !qp.ownRing {
		qp.postRecv(ri)
	}
}

// mapData resolves the command's SGL: in-capsule data, or a keyed host
// buffer that needs a data buffer and, for writes, an RDMA READ.
func (qp *QueuePair) mapData(r *request) {
	sgl := r.Cmd.SGL()
	switch sgl.ID() {
	case nvme.SGLDataBlockOffset:
		if r.Len > 0 {
			if st := r.MapInline(r.inline); st != 0 {
				qp.fq.Fail(&r.Request, st)
				return
			}
		}
		qp.fq.Execute(&r.Request)
	default:
		if r.Len == 0 {
			// No data: the Linux host sends a null keyed descriptor.
			if id := sgl.ID(); id != nvme.SGLKeyed && id != nvme.SGLKeyedInvalidate {
				qp.fq.Fail(&r.Request, nvme.StatusSGLInvalidType|nvme.DNR)
				return
			}
			qp.fq.Execute(&r.Request)
			return
		}
		n, st := r.KeyedDescriptors(r.inline, &r.descs)
		if st != 0 {
			qp.fq.Fail(&r.Request, st)
			return
		}
		r.ndesc = transferDescriptors(r.descs[:n], r.Len)
		// One response can invalidate one key only, and only where the
		// device can Send with Invalidate; otherwise the host
		// invalidates the key itself.
		r.invalidate = qp.sendInv && n == 1 && r.descs[0].Invalidate
		r.order = orderFor(r.Len)
		got, waits := qp.pairBlock(r)
		if !got && (waits || !qp.takeBlock(r)) {
			qp.move(r, stateNeedBuffer)
			return
		}
		qp.startTransfer(r)
	}
}

// transferDescriptors is how many of descs a transfer of n bytes touches:
// one RDMA READ or WRITE each.
func transferDescriptors(descs []fabrics.Keyed, n uint32) int {
	pos := uint32(0)
	for i := range descs {
		if pos >= n {
			return i
		}
		pos += min(descs[i].Len, n-pos)
	}
	return len(descs)
}

// startTransfer runs a request that holds a data buffer: it reads the
// host's data first for writes, or executes at once.
func (qp *QueuePair) startTransfer(r *request) {
	r.Data = qp.pool.block(r.data, r.Len)
	if r.Dir == fabrics.DirHostToCtrl {
		c, ok := qp.budget.tryRead(int32(r.Tag), r.ndesc)
		if !ok {
			qp.move(r, stateReadWait)
			return
		}
		qp.postReads(r, c)
		return
	}
	if r.state != stateExecuting && !qp.move(r, stateExecuting) { // it waited for the buffer
		return
	}
	if qp.qid == 0 || r.Cmd.Opcode() != nvme.IORead {
		// Pool blocks carry whatever their last transfer left, another
		// host's data included. A Read fills its block from the
		// backend; the commands that build their data (Identify, log
		// pages) write only the fields they set.
		clear(r.Data)
	}
	qp.fq.Execute(&r.Request)
}

// postReads posts the RDMA READs of r, holding credits c. RC completes
// them in order, so only the last is signaled.
func (qp *QueuePair) postReads(r *request, c charge) {
	if !qp.move(r, stateReading) {
		qp.budget.retire(c)
		return
	}
	r.held = c
	qp.postTransfers(r, C.NT_READ, true)
}

// postTransfers queues the RDMA READs or WRITEs that move r.Data to or from
// the host buffers of its keyed descriptors, in order.
func (qp *QueuePair) postTransfers(r *request, op C.uint8_t, signalLast bool) {
	kind := uint64(kindSend)
	if op == C.NT_READ {
		kind = kindRead
	}
	pos := uint32(0)
	for i := 0; i < r.ndesc && pos < r.Len; i++ {
		d := &r.descs[i]
		n := min(d.Len, r.Len-pos)
		w := qp.nextWR()
		*w = C.struct_nt_wr{wr_id: C.uint64_t(kind | uint64(r.Tag)), laddr: C.uint64_t(addr(r.Data[pos:])),
			raddr: C.uint64_t(d.Addr), len: C.uint32_t(n), lkey: C.uint32_t(qp.pool.mem.lkey),
			rkey: C.uint32_t(d.Key), op: op}
		pos += n
		if signalLast && pos == r.Len {
			w.signaled = 1
		}
	}
}

func (qp *QueuePair) onReadDone(r *request) {
	if !qp.expect(r, stateReading, kindRead) {
		return
	}
	if qp.stopping.Load() {
		// fabrics may have let go of the queue: the command never runs.
		qp.release(r)
		return
	}
	if !qp.move(r, stateExecuting) {
		return
	}
	qp.budget.retire(r.held)
	r.held = charge{}
	qp.fq.Execute(&r.Request)
	qp.resume()
}

// expect checks that a successful completion of kind found r in the state
// that posted it; anything else is a bug, counted like an invalid
// transition, and r is left where it is for teardown.
func (qp *QueuePair) expect(r *request, want reqState, kind uint64) bool {
	if r.state == want {
		return true
	}
	invalidTransitions.Add(1)
	qp.log.WithFields(logrus.Fields{"tag": r.Tag, "state": r.state, "completion": kindName(kind)}).
		Error("completion for a request not waiting for it; disconnecting the queue (the host reconnects)")
	qp.Disconnect()
	return false
}

func kindName(kind uint64) string {
	switch kind {
	case kindRecv:
		return "recv"
	case kindRead:
		return "rdma_read"
	}
	return "send"
}

// Complete implements fabrics.QueueTransport: the capsule's receive buffer
// goes back to the host, then the data (for reads) and the response go out
// in one chain once the send queue has room for it. Only a command
// fabrics holds can complete: one whose RDMA READs are still writing into
// its buffer (or that is anywhere else) is refused, and stays for its own
// completion.
func (qp *QueuePair) Complete(fr *fabrics.Request) {
	r := &qp.reqs[fr.Tag]
	if r.state != stateExecuting {
		qp.invalidTransition(r, r.state, stateSending)
		return
	}
	if r.recv >= 0 {
		qp.postRecv(r.recv)
		r.recv = -1
	}
	if !qp.joined {
		qp.joinOnConnect()
	}
	c, ok := qp.budget.trySend(int32(r.Tag), qp.responseWrites(r))
	if !ok {
		qp.move(r, stateSendWait) // from executing: always valid
		return
	}
	qp.postResponse(r, c)
}

// Requests implements fabrics.RequestCounter: the queue pair admits
// twice its depth of commands.
func (qp *QueuePair) Requests() int { return len(qp.reqs) }

// responseWrites is how many RDMA WRITEs go before r's response.
func (qp *QueuePair) responseWrites(r *request) int {
	if r.Dir == fabrics.DirCtrlToHost && r.Status().Success() && r.data >= 0 {
		return r.ndesc
	}
	return 0
}

// postResponse posts r's data (for reads) and response, holding credits c.
func (qp *QueuePair) postResponse(r *request, c charge) {
	if !qp.move(r, stateSending) {
		qp.budget.retire(c)
		return
	}
	r.held = c
	if qp.responseWrites(r) > 0 {
		qp.postTransfers(r, C.NT_WRITE, false)
	}
	w := qp.nextWR()
	*w = C.struct_nt_wr{wr_id: C.uint64_t(kindSend | uint64(r.Tag)), laddr: C.uint64_t(addr(r.Rsp)),
		len: nvme.CompletionSize, lkey: C.uint32_t(qp.ctl.mem.lkey), op: C.NT_SEND, signaled: 1}
	if r.invalidate {
		w.op, w.inv_rkey = C.NT_SEND_INV, C.uint32_t(r.descs[0].Key)
	}
}

func (qp *QueuePair) onSendDone(r *request) {
	if !qp.expect(r, stateSending, kindSend) {
		return
	}
	qp.release(r)
	qp.resume()
}

// resume posts the waiting chains that fit now that credits came back,
// oldest first, responses before reads.
func (qp *QueuePair) resume() {
	if qp.stopping.Load() {
		return // what waits is returned at teardown
	}
	for {
		c, read, ok := qp.budget.next()
		if !ok {
			return
		}
		r := &qp.reqs[c.tag]
		if read {
			qp.postReads(r, c)
		} else {
			qp.postResponse(r, c)
		}
	}
}

func (qp *QueuePair) postRecv(i int32) {
	qp.srqDelta++
	qp.rq.fill(qp.nextWR(), i)
}

// nextWR returns the next free slot of the pending batch, posting the
// batch first if it is full.
func (qp *QueuePair) nextWR() *C.struct_nt_wr {
	if qp.nwr == len(qp.wrs) {
		if err := qp.flushPosts(); err != nil {
			qp.log.WithError(err).Error("posting work requests failed; disconnecting the queue")
			qp.Disconnect()
		}
	}
	w := &qp.wrs[qp.nwr]
	qp.nwr++
	return w
}

// flushPosts posts the pending batch in one call.
func (qp *QueuePair) flushPosts() error {
	n := qp.nwr
	if n == 0 {
		return nil
	}
	qp.nwr = 0
	if qp.stopping.Load() {
		// Never handed to the device, so never completed.
		n = qp.dropPosts(n)
		if n == 0 {
			return nil
		}
	}
	var failed C.int
	if ret := C.nt_post(qp.qp, qp.rq.srq, (*C.struct_nt_wr)(qp.wrsPtr), C.int(n), &failed); ret != 0 {
		return fmt.Errorf("ibv_post (op %d): %w", int(failed), unix.Errno(ret))
	}
	return nil
}

// dropPosts accounts for a batch of n work requests dropped because the
// queue pair is stopping: a request whose signaled work request was in it
// will see no completion, so it goes back now. Receives for a shared
// receive queue, which outlives the queue pair, are kept, moved to the
// front of the batch: it returns how many.
func (qp *QueuePair) dropPosts(n int) int {
	kept := 0
	for i := range n {
		w := &qp.wrs[i]
		id := uint64(w.wr_id)
		if id&kindMask == kindRecv {
			if !qp.ownRing {
				qp.wrs[kept] = *w
				kept++
			}
			continue
		}
		if w.signaled == 0 {
			continue
		}
		// Only the chain r is on the wire with: a stray work request of
		// another kind must not free a buffer the device still fills.
		if r := &qp.reqs[id&^kindMask]; r.posted(id & kindMask) {
			qp.release(r)
		}
	}
	return kept
}

// newBatch allocates the queue pair's batch of n work requests in C
// memory; freeBatch frees it.
func newBatch(n int) ([]C.struct_nt_wr, unsafe.Pointer, error) { return cArray[C.struct_nt_wr](n) }

func freeBatch(_ []C.struct_nt_wr, p unsafe.Pointer) {
	if p != nil {
		C.free(p)
	}
}
