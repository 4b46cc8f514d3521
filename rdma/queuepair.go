package rdma

/*
#include <stdlib.h>
#include "verbs.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Request states. A request moves NEW → (NEED_BUFFER) → (READ_WAIT) →
// (READING) → EXECUTING → (SEND_WAIT) → SENDING → FREE; errors jump
// straight to SEND_WAIT or SENDING with a failure status. The WAIT states
// hold a request whose work requests do not fit the send queue budget
// (credits.go) yet.
const (
	stateFree = iota
	stateNeedBuffer
	stateReadWait
	stateReading
	stateExecuting
	stateSendWait
	stateSending
)

// Work request IDs carry their kind in the top byte and an index below.
const (
	kindRecv = 1 << 56
	kindRead = 2 << 56
	kindSend = 3 << 56
	kindMask = 0xff << 56
)

var debugWC = os.Getenv("NVMEOF_TGT_DEBUG_WC") != ""

// spinWindow is how long the poller keeps polling an idle completion queue
// before it arms it and sleeps: long enough to catch a host's next command
// at queue depth 1 without a wake-up, short enough that an idle target
// burns no CPU. NVMEOF_TGT_SPIN_US overrides it for tuning.
var spinWindow = func() time.Duration {
	if n, err := strconv.Atoi(os.Getenv("NVMEOF_TGT_SPIN_US")); err == nil && n >= 0 {
		return time.Duration(n) * time.Microsecond
	}
	return 200 * time.Microsecond
}()

const (
	pollBatch = 32
	// adminDataBuffers is the number of data buffers of an admin queue:
	// admin commands are few and mostly small.
	adminDataBuffers = 4
	// smallBuffer is the size of the data buffers most commands use; one
	// per receive. Transfers above it, up to fabrics.MaxDataTransfer, take
	// one of a few large buffers, so MDTS costs little pinned memory.
	smallBuffer = 128 << 10
)

// largeBuffers is how many MaxDataTransfer-sized buffers a queue pair of
// depth has.
func largeBuffers(depth int, admin bool) int {
	if admin {
		return 1
	}
	return max(2, depth/32)
}

// bufferPool is one size class of data buffers: the free ones, and the
// requests waiting for one, oldest first.
type bufferPool struct {
	free    []int32
	waiting []int32
}

// take returns a free buffer, or queues request tag and returns -1.
func (p *bufferPool) take(tag int32) int32 {
	if len(p.free) == 0 {
		p.waiting = append(p.waiting, tag)
		return -1
	}
	d := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return d
}

// give hands buffer d to the oldest waiting request, returned, or frees it
// and returns -1.
func (p *bufferPool) give(d int32) int32 {
	if len(p.waiting) == 0 {
		p.free = append(p.free, d)
		return -1
	}
	next := p.waiting[0]
	copy(p.waiting, p.waiting[1:])
	p.waiting = p.waiting[:len(p.waiting)-1]
	return next
}

// request is the transport's state of one command, wrapping the fabrics
// request. It is preallocated and reused.
type request struct {
	fabrics.Request
	state      uint8
	recv       int32 // receive buffer holding the capsule, -1 once reposted
	data       int32 // data buffer, -1 if none
	inline     []byte
	descs      [fabrics.MaxKeyedDescriptors]fabrics.Keyed
	ndesc      int
	invalidate bool
	held       charge // send queue credits of the chain in flight
}

// QueuePair is one accepted NVMe-oF queue: an RC queue pair, its completion
// queue and channel, its registered memory and its poller.
type QueuePair struct {
	l    *Listener
	id   *C.struct_rdma_cm_id
	dev  *device
	qp   *C.struct_ibv_qp
	cq   *C.struct_ibv_cq
	cc   *C.struct_ibv_comp_channel
	mem  *memoryRegion
	fq   *fabrics.Queue
	log  *logrus.Entry
	peer string
	qid  uint16
	port int // the device port, for port events

	budget  sendBudget
	sendInv bool // the device can Send with Invalidate
	failed  bool // a failed completion was logged; the rest are debug

	cmdBufs    [][]byte // 64-byte command capsules, one per receive
	inlineBufs [][]byte // page-aligned in-capsule data, one per receive
	dataBufs   [][]byte
	reqs       []request
	freeReqs   []int32
	small      bufferPool // dataBufs[:nsmall], smallBuffer bytes each
	large      bufferPool // dataBufs[nsmall:], fabrics.MaxDataTransfer bytes each
	nsmall     int32
	wrs        []C.struct_nt_wr
	wrsPtr     unsafe.Pointer
	nwr        int
	wcs        []C.struct_nt_wc
	wcsPtr     unsafe.Pointer
	eventfd    int
	sleeping   atomic.Bool
	awake      time.Time // when the poller last woke, for busy time
	stopping   atomic.Bool
	mu         sync.Mutex // guards id against use after teardown
	destroyed  bool
	discDone   bool
	done       chan struct{}
}

// queueSizes are the sizes of one queue pair's verbs resources.
type queueSizes struct {
	depth   int // receives: commands the host may have outstanding
	nreq    int // requests: a response may still be in flight when the host's next command lands
	ndata   int // small data buffers
	nlarge  int // MaxDataTransfer-sized data buffers
	inline  int // in-capsule data bytes per receive
	sendWR  int // send queue entries, and the slots of the send budget
	recvWR  int
	cqe     int // completion queue entries: every work request that can be outstanding
	maxRead int // RDMA READs in flight: the initiator depth agreed at accept
}

// deviceLimits are the device attributes that bound a queue pair.
type deviceLimits struct {
	maxQPWR, maxCQE, maxReadAtom int
}

// minSendWR is the longest chain one request posts: a response of one RDMA
// WRITE per keyed descriptor and the SEND.
const minSendWR = fabrics.MaxKeyedDescriptors + 1

// sizeQueue sizes a queue pair for a host queue of depth commands. The
// completion queue gets an entry for every receive and every send queue
// slot: on an error the device completes each posted work request,
// signaled or not, and a completion queue that overflows breaks the whole
// queue pair. Where the device cannot have a CQ that large, the send
// queue shrinks instead (the send budget keeps within it).
func sizeQueue(depth int, admin bool, inline int, lim deviceLimits, initiator int) (queueSizes, error) {
	sz := queueSizes{depth: depth, nreq: 2 * depth, ndata: depth, nlarge: largeBuffers(depth, admin),
		inline: inline, recvWR: depth, maxRead: initiator}
	if admin {
		sz.ndata = adminDataBuffers
	}
	sz.sendWR = max(2*sz.nreq+1, minSendWR)
	sz.sendWR = min(sz.sendWR, lim.maxQPWR, lim.maxCQE-sz.recvWR)
	if sz.recvWR > lim.maxQPWR || sz.sendWR < minSendWR {
		return sz, fmt.Errorf("a queue of %d entries needs %d receive and at least %d send work requests and a completion queue for both; the device allows %d work requests and %d completion queue entries: lower max_queue_size",
			depth, sz.recvWR, minSendWR, lim.maxQPWR, lim.maxCQE)
	}
	sz.cqe = sz.sendWR + sz.recvWR
	return sz, nil
}

// newQueuePair creates the verbs resources for an incoming connection and
// posts its receives. The caller accepts or rejects the connection; on an
// error everything created so far is freed again.
func newQueuePair(l *Listener, id *C.struct_rdma_cm_id, dev *device, req nvme.CMRequest, peer string, initiator int) (*QueuePair, error) {
	inline := int(l.port.InlineDataSize)
	if req.QID == 0 {
		// The admin queue carries no in-capsule data beyond Connect's.
		inline = nvme.ConnectDataSize
	}
	lim := deviceLimits{int(dev.info.max_qp_wr), int(dev.info.max_cqe), int(dev.info.max_qp_init_rd_atom)}
	sz, err := sizeQueue(req.RecvDepth(), req.QID == 0, inline, lim, initiator)
	if err != nil {
		return nil, err
	}
	qp := &QueuePair{
		l: l, id: id, dev: dev, peer: peer, qid: req.QID,
		port:    int(C.nt_id_port(id)),
		sendInv: dev.caps().sendInvalidate,
		done:    make(chan struct{}),
		eventfd: -1,
	}
	qp.log = l.log.WithFields(logrus.Fields{"qid": req.QID, "peer": peer})
	if err := qp.setUp(sz); err != nil {
		qp.free()
		return nil, err
	}
	qp.fq = fabrics.NewQueue(l.target, l.port, req.QID, sz.depth, qp)
	return qp, nil
}

// setUp creates the verbs objects, the registered memory and the batches,
// then posts the receives. free undoes whatever part of it succeeded.
func (qp *QueuePair) setUp(sz queueSizes) error {
	if err := qp.createVerbs(sz); err != nil {
		return err
	}
	if err := qp.layOutMemory(sz); err != nil {
		return err
	}
	var err error
	// Every completion of a pass may produce a receive, a write and a send.
	if qp.wrs, qp.wrsPtr, err = cArray[C.struct_nt_wr](3*sz.nreq + 3*pollBatch); err != nil {
		return err
	}
	if qp.wcs, qp.wcsPtr, err = cArray[C.struct_nt_wc](pollBatch); err != nil {
		return err
	}
	if qp.eventfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		qp.eventfd = -1
		return fmt.Errorf("eventfd: %w", err)
	}
	qp.budget = newSendBudget(sz.sendWR, sz.maxRead, sz.nreq)
	for i := range qp.cmdBufs {
		qp.postRecv(int32(i))
	}
	return qp.flushPosts()
}

// createVerbs creates the completion channel, completion queue and queue
// pair on the CM id.
func (qp *QueuePair) createVerbs(sz queueSizes) error {
	var err error
	qp.cc, err = C.ibv_create_comp_channel(qp.dev.ctx)
	if qp.cc == nil {
		return fmt.Errorf("create completion channel: %w", err)
	}
	if ret := C.nt_set_nonblock(qp.cc.fd); ret != 0 {
		return errnoErr("completion channel non-blocking", ret)
	}
	qp.cq, err = C.ibv_create_cq(qp.dev.ctx, C.int(sz.cqe), nil, qp.cc, 0)
	if qp.cq == nil {
		return fmt.Errorf("create completion queue of %d entries: %w", sz.cqe, err)
	}
	recvSGE := 1
	if sz.inline > 0 {
		recvSGE = 2
	}
	if ret := C.nt_create_qp(qp.id, qp.dev.pd, qp.cq, C.int(sz.sendWR), C.int(sz.recvWR), C.int(recvSGE)); ret != 0 {
		return errnoErr(fmt.Sprintf("create queue pair (%d send, %d receive work requests)", sz.sendWR, sz.recvWR), ret)
	}
	qp.qp = C.nt_id_qp(qp.id)
	return nil
}

// layOutMemory registers the queue pair's one region and carves it up:
// in-capsule data and data buffers first, on page boundaries for
// O_DIRECT backends, then commands and responses.
func (qp *QueuePair) layOutMemory(sz queueSizes) error {
	// In-capsule data gets its own page-aligned segment so that O_DIRECT
	// backends can write it where it landed.
	inlineStride := align(sz.inline, 4096)
	inlineOff := 0
	dataOff := inlineOff + sz.depth*inlineStride
	largeOff := dataOff + sz.ndata*smallBuffer
	cmdOff := largeOff + sz.nlarge*fabrics.MaxDataTransfer
	rspOff := cmdOff + sz.depth*nvme.CommandSize
	total := align(rspOff+sz.nreq*nvme.CompletionSize, 4096)
	var err error
	if qp.mem, err = registerRegion(qp.dev.pd, total, qp.dev.caps().regionAccess()); err != nil {
		return err
	}
	buf := qp.mem.buf
	qp.cmdBufs = make([][]byte, sz.depth)
	qp.inlineBufs = make([][]byte, sz.depth)
	for i := range qp.cmdBufs {
		c := cmdOff + i*nvme.CommandSize
		qp.cmdBufs[i] = buf[c : c+nvme.CommandSize : c+nvme.CommandSize]
		d := inlineOff + i*inlineStride
		qp.inlineBufs[i] = buf[d : d+sz.inline : d+sz.inline]
	}
	qp.dataBufs = make([][]byte, sz.ndata+sz.nlarge)
	qp.nsmall = int32(sz.ndata)
	qp.small.free = make([]int32, 0, sz.ndata)
	qp.large.free = make([]int32, 0, sz.nlarge)
	for i := sz.ndata - 1; i >= 0; i-- {
		off := dataOff + i*smallBuffer
		qp.dataBufs[i] = buf[off : off+smallBuffer : off+smallBuffer]
		qp.small.free = append(qp.small.free, int32(i))
	}
	for i := sz.nlarge - 1; i >= 0; i-- {
		off := largeOff + i*fabrics.MaxDataTransfer
		qp.dataBufs[sz.ndata+i] = buf[off : off+fabrics.MaxDataTransfer : off+fabrics.MaxDataTransfer]
		qp.large.free = append(qp.large.free, int32(sz.ndata+i))
	}
	qp.reqs = make([]request, sz.nreq)
	qp.freeReqs = make([]int32, 0, sz.nreq)
	qp.small.waiting = make([]int32, 0, sz.nreq)
	qp.large.waiting = make([]int32, 0, sz.nreq)
	for i := range qp.reqs {
		r := &qp.reqs[i]
		off := rspOff + i*nvme.CompletionSize
		r.Rsp = nvme.Completion(buf[off : off+nvme.CompletionSize])
		r.Tag = i
		r.recv, r.data = -1, -1
		qp.freeReqs = append(qp.freeReqs, int32(sz.nreq-1-i))
	}
	return nil
}

func align(n, a int) int { return (n + a - 1) / a * a }

// start runs the poller.
func (qp *QueuePair) start() { go qp.poll() }

// poll is the queue pair's poller goroutine.
func (qp *QueuePair) poll() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	qp.awake = time.Now()
	defer func() { pollerBusy.Add(int64(time.Since(qp.awake))) }()
	var idleSince time.Time
	for !qp.stopping.Load() {
		if qp.pollOnce() > 0 {
			idleSince = time.Time{}
			continue
		}
		now := time.Now()
		if idleSince.IsZero() {
			idleSince = now
		} else if now.Sub(idleSince) >= spinWindow {
			qp.sleep()
			idleSince = time.Time{}
		}
	}
	qp.teardown()
}

// pollOnce handles one batch of completions and of finished backend work,
// then posts every work request they produced. It returns how much it did.
func (qp *QueuePair) pollOnce() int {
	return qp.process(int(C.nt_poll(qp.cq, (*C.struct_nt_wc)(qp.wcsPtr), pollBatch)))
}

// process handles n polled completions and the backend work that finished,
// then posts the batch of work requests they produced.
func (qp *QueuePair) process(n int) int {
	for i := 0; i < n; i++ {
		qp.handle(&qp.wcs[i])
	}
	if qp.fq.Pending() {
		qp.fq.Reap()
		n++
	}
	if err := qp.flushPosts(); err != nil {
		qp.log.WithError(err).Error("posting work requests failed; disconnecting the queue")
		qp.Disconnect()
	}
	return n
}

// sleep arms the completion queue and blocks until a completion event, a
// wake from a backend worker, or a stop. Arming and the poll that must
// follow it are one C call, as are taking the event and the next poll.
func (qp *QueuePair) sleep() {
	qp.sleeping.Store(true)
	n := int(C.nt_arm_poll(qp.cq, (*C.struct_nt_wc)(qp.wcsPtr), pollBatch))
	if n < 0 {
		qp.sleeping.Store(false)
		qp.log.WithError(unix.Errno(-n)).Error("arming the completion queue failed; disconnecting the queue")
		qp.Disconnect()
		return
	}
	if n > 0 || qp.fq.Pending() || qp.stopping.Load() {
		qp.sleeping.Store(false)
		qp.process(n)
		return
	}
	fds := [2]unix.PollFd{{Fd: int32(qp.cc.fd), Events: unix.POLLIN}, {Fd: int32(qp.eventfd), Events: unix.POLLIN}}
	slept := time.Now()
	pollerBusy.Add(int64(slept.Sub(qp.awake)))
	_, err := unix.Poll(fds[:], -1)
	qp.awake = time.Now()
	pollerIdle.Add(int64(qp.awake.Sub(slept)))
	qp.sleeping.Store(false)
	if err != nil && err != unix.EINTR {
		qp.log.WithError(err).Error("poll on completion channel failed; disconnecting the queue")
		qp.Disconnect()
		return
	}
	if fds[1].Revents != 0 {
		var b [8]byte
		unix.Read(qp.eventfd, b[:])
	}
	if fds[0].Revents != 0 {
		qp.process(int(C.nt_event_poll(qp.cc, qp.cq, (*C.struct_nt_wc)(qp.wcsPtr), pollBatch)))
	}
}

// Wake implements fabrics.QueueTransport.
func (qp *QueuePair) Wake() {
	if qp.sleeping.Load() {
		qp.kick()
	}
}

func (qp *QueuePair) kick() {
	one := [8]byte{1}
	unix.Write(qp.eventfd, one[:])
}

// Peer implements fabrics.QueueTransport.
func (qp *QueuePair) Peer() string { return qp.peer }

// Disconnect implements fabrics.QueueTransport: it starts an orderly
// teardown from any goroutine.
func (qp *QueuePair) Disconnect() {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.destroyed {
		return
	}
	if !qp.discDone {
		qp.discDone = true
		C.rdma_disconnect(qp.id)
	}
	qp.stopping.Store(true)
	qp.kick()
}

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
	if n < nvme.CommandSize {
		qp.log.WithField("bytes", n).Warn("capsule shorter than a command; disconnecting the queue")
		qp.Disconnect()
		return
	}
	if len(qp.freeReqs) == 0 {
		qp.log.Warn("host exceeded its queue depth; disconnecting the queue")
		qp.Disconnect()
		return
	}
	r := &qp.reqs[qp.freeReqs[len(qp.freeReqs)-1]]
	qp.freeReqs = qp.freeReqs[:len(qp.freeReqs)-1]
	r.recv, r.data, r.invalidate, r.ndesc = ri, -1, false, 0
	r.Cmd = nvme.Command(qp.cmdBufs[ri])
	r.inline = qp.inlineBufs[ri][:n-nvme.CommandSize]
	r.state = stateExecuting
	if !qp.fq.Prepare(&r.Request) {
		return // completed with an error already
	}
	qp.mapData(r)
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
		pool := &qp.small
		if r.Len > smallBuffer {
			pool = &qp.large
		}
		if r.data = pool.take(int32(r.Tag)); r.data < 0 {
			r.state = stateNeedBuffer
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
	r.Data = qp.dataBufs[r.data][:r.Len]
	if r.Dir == fabrics.DirHostToCtrl {
		c, ok := qp.budget.tryRead(int32(r.Tag), r.ndesc)
		if !ok {
			r.state = stateReadWait
			return
		}
		qp.postReads(r, c)
		return
	}
	r.state = stateExecuting
	qp.fq.Execute(&r.Request)
}

// postReads posts the RDMA READs of r, holding credits c. RC completes
// them in order, so only the last is signaled.
func (qp *QueuePair) postReads(r *request, c charge) {
	r.held = c
	r.state = stateReading
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
			raddr: C.uint64_t(d.Addr), len: C.uint32_t(n), lkey: C.uint32_t(qp.mem.lkey),
			rkey: C.uint32_t(d.Key), op: op}
		pos += n
		if signalLast && pos == r.Len {
			w.signaled = 1
		}
	}
}

func (qp *QueuePair) onReadDone(r *request) {
	qp.budget.retire(r.held)
	r.held = charge{}
	r.state = stateExecuting
	qp.fq.Execute(&r.Request)
	qp.resume()
}

// Complete implements fabrics.QueueTransport: the capsule's receive buffer
// goes back to the host, then the data (for reads) and the response go out
// in one chain once the send queue has room for it.
func (qp *QueuePair) Complete(fr *fabrics.Request) {
	r := &qp.reqs[fr.Tag]
	if r.recv >= 0 {
		qp.postRecv(r.recv)
		r.recv = -1
	}
	c, ok := qp.budget.trySend(int32(r.Tag), qp.responseWrites(r))
	if !ok {
		r.state = stateSendWait
		return
	}
	qp.postResponse(r, c)
}

// responseWrites is how many RDMA WRITEs go before r's response.
func (qp *QueuePair) responseWrites(r *request) int {
	if r.Dir == fabrics.DirCtrlToHost && r.Status().Success() && r.data >= 0 {
		return r.ndesc
	}
	return 0
}

// postResponse posts r's data (for reads) and response, holding credits c.
func (qp *QueuePair) postResponse(r *request, c charge) {
	r.held = c
	if qp.responseWrites(r) > 0 {
		qp.postTransfers(r, C.NT_WRITE, false)
	}
	w := qp.nextWR()
	*w = C.struct_nt_wr{wr_id: C.uint64_t(kindSend | uint64(r.Tag)), laddr: C.uint64_t(addr(r.Rsp)),
		len: nvme.CompletionSize, lkey: C.uint32_t(qp.mem.lkey), op: C.NT_SEND, signaled: 1}
	if r.invalidate {
		w.op, w.inv_rkey = C.NT_SEND_INV, C.uint32_t(r.descs[0].Key)
	}
	r.state = stateSending
}

func (qp *QueuePair) onSendDone(r *request) {
	qp.budget.retire(r.held)
	r.held = charge{}
	if r.data >= 0 {
		d := r.data
		r.data = -1
		pool := &qp.small
		if d >= qp.nsmall {
			pool = &qp.large
		}
		if next := pool.give(d); next >= 0 {
			n := &qp.reqs[next]
			n.data = d
			qp.startTransfer(n)
		}
	}
	r.Data, r.inline = nil, nil
	r.state = stateFree
	qp.freeReqs = append(qp.freeReqs, int32(r.Tag))
	qp.resume()
}

// resume posts the waiting chains that fit now that credits came back,
// oldest first, responses before reads.
func (qp *QueuePair) resume() {
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
	cmd, inline := qp.cmdBufs[i], qp.inlineBufs[i]
	w := qp.nextWR()
	*w = C.struct_nt_wr{wr_id: C.uint64_t(kindRecv | uint64(i)), laddr: C.uint64_t(addr(cmd)),
		len: C.uint32_t(len(cmd)), lkey: C.uint32_t(qp.mem.lkey), op: C.NT_RECV}
	if len(inline) > 0 {
		w.laddr2, w.len2 = C.uint64_t(addr(inline)), C.uint32_t(len(inline))
	}
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
		return nil
	}
	var failed C.int
	if ret := C.nt_post(qp.qp, (*C.struct_nt_wr)(qp.wrsPtr), C.int(n), &failed); ret != 0 {
		return fmt.Errorf("ibv_post (op %d): %w", int(failed), unix.Errno(ret))
	}
	return nil
}

// teardown runs on the poller once it stops: fabrics lets go of the
// queue, then the verbs resources and memory are freed, then the queue
// pair's hold on its device and its CM id, and last its hold on the
// listener's event channel, which outlives it.
func (qp *QueuePair) teardown() {
	qp.mu.Lock()
	if !qp.discDone {
		qp.discDone = true
		C.rdma_disconnect(qp.id)
	}
	qp.mu.Unlock()
	qp.fq.Close()
	qp.l.target.ReleaseQueue()
	qp.l.forget(qp)
	qp.mu.Lock()
	qp.destroyed = true
	qp.mu.Unlock()
	qp.free()
	qp.dev.release()
	C.rdma_destroy_id(qp.id)
	qp.log.Debug("queue pair freed")
	qp.l.queuePairGone()
	close(qp.done)
}

// free releases everything but the CM id and the device, whatever part of
// set-up got done.
func (qp *QueuePair) free() {
	if qp.qp != nil {
		qp.dev.unwatch(qp)
		C.rdma_destroy_qp(qp.id)
		qp.qp = nil
	}
	if qp.cq != nil {
		C.ibv_destroy_cq(qp.cq)
		qp.cq = nil
	}
	if qp.cc != nil {
		C.ibv_destroy_comp_channel(qp.cc)
		qp.cc = nil
	}
	qp.mem.free()
	qp.mem = nil
	if qp.wrsPtr != nil {
		C.free(qp.wrsPtr)
		qp.wrsPtr, qp.wrs = nil, nil
	}
	if qp.wcsPtr != nil {
		C.free(qp.wcsPtr)
		qp.wcsPtr, qp.wcs = nil, nil
	}
	if qp.eventfd >= 0 {
		unix.Close(qp.eventfd)
		qp.eventfd = -1
	}
}
