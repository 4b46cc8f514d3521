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
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Work request IDs carry their kind in the top byte and an index below.
const (
	kindRecv = 1 << 56
	kindRead = 2 << 56
	kindSend = 3 << 56
	kindMask = 0xff << 56
)

var debugWC = os.Getenv("NVMEOF_TGT_DEBUG_WC") != ""

// spinWindow is how long an idle poller spins while its host streams
// (fabrics.Spin): long enough to catch a host's next command at queue
// depth 1 without a wake-up, short enough that an idle target burns no
// CPU.
var spinWindow = fabrics.SpinWindow(200 * time.Microsecond)

// pollBatch is how many completions one pass polls.
const pollBatch = 32

// QueuePair is one accepted NVMe-oF queue: an RC queue pair, its completion
// queue and channel, its registered memory and its poller.
type QueuePair struct {
	l   *Listener
	id  *C.struct_rdma_cm_id
	dev *device
	qp  *C.struct_ibv_qp
	cq  *C.struct_ibv_cq
	cc  *C.struct_ibv_comp_channel
	fq  *fabrics.Queue
	log *logrus.Entry
	// place is the queue pair's hold on a limits.max_queue_pairs place,
	// given back at teardown.
	place *fabrics.Place
	peer  string
	qid   uint16
	port  int // the device port, for port events

	budget  sendBudget
	sendInv bool // the device can Send with Invalidate
	failed  bool // a failed completion was logged; the rest are debug

	rq        *recvRing // the device's shared receive queue, or ownRing
	ownRing   bool
	pool      *dataPool // the device's data buffers
	ctl       *dataPool // the device's response memory
	rspUnit   int32     // this queue pair's block of ctl, -1 if none
	rspOrder  int8
	cache     qpCache     // free data blocks kept back from pool
	held      int         // data blocks requests hold
	heldBytes int64       // their bytes and those its requests wait for, against its share (share.go)
	parked    []int32     // requests waiting past the share for held blocks to come back
	joined    bool        // counted in the pool's shares, from its Connect (joinOnConnect)
	granted   chan grant  // blocks pool handed to waiting requests
	waitBufs  [][]byte    // free copies for in-capsule data waiting on QoS (qos.go)
	waitLent  int         // copies commands hold
	recheck   atomic.Bool // a fence asks for the requests waiting for a block to be checked again (recheck.go)

	reqs      []request
	freeReqs  []int32
	inState   [numStates]int32 // requests in each state
	wrs       []C.struct_nt_wr
	wrsPtr    unsafe.Pointer
	nwr       int
	wcs       []C.struct_nt_wc
	wcsPtr    unsafe.Pointer
	eventfd   int
	sleeping  atomic.Bool
	awake     time.Time // when the poller last woke, for busy time
	spin      fabrics.Spin
	idle      fabrics.IdleParker // where an idle poller sleeps
	stopping  atomic.Bool
	mu        sync.Mutex // guards id against use after teardown
	destroyed bool
	discDone  bool
	done      chan struct{}

	hook func(*QueuePair) // tests: pollHook

	// lastWQE: the device reported the queue pair's last receive from
	// the shared receive queue (device.lastWQEReached); lastWQEBy is
	// how long teardown waits for it on a device not known to raise it.
	lastWQE   atomic.Bool
	lastWQEBy time.Time
	// srqDelta is the shared receive queue entries this poller posted
	// less the receive completions it polled, not yet folded into the
	// ring's count (foldSRQ). Poller-local, so that counting costs the
	// hot path no atomic per command.
	srqDelta int64
}

// queueSizes are the sizes of one queue pair's verbs resources.
type queueSizes struct {
	depth    int // receives: commands the host may have outstanding
	srqDepth int // entries of the shared receive queue, 0 for the queue pair's own ring
	nreq     int // requests: a response may still be in flight when the host's next command lands
	inline   int // in-capsule data bytes per receive
	sendWR   int // send queue entries, and the slots of the send budget
	recvWR   int
	cqe      int // completion queue entries: every work request that can be outstanding
	maxRead  int // RDMA READs in flight: the initiator depth agreed at accept
}

// deviceLimits are the device attributes that bound a queue pair.
type deviceLimits struct {
	maxQPWR, maxCQE, maxReadAtom int
}

// minSendWR is the longest chain one request posts: a response of one RDMA
// WRITE per keyed descriptor and the SEND.
const minSendWR = fabrics.MaxKeyedDescriptors + 1

// sizeQueue sizes a queue pair for a host queue of depth commands, on a
// shared receive queue of srqDepth entries (0: its own ring). The
// completion queue gets an entry for every receive that can complete into
// it and every send queue slot: on an error the device completes each
// posted work request, signaled or not, and a completion queue that
// overflows breaks the whole queue pair (and, on a shared receive queue,
// loses the entries whose completions it dropped). On a shared receive
// queue that is every entry of it, not depth: nothing stops a host from
// sending past its queue size, and each command it sends takes an entry
// until the poller sees it. Where the device cannot have a CQ that large,
// the send queue shrinks instead (the send budget keeps within it).
func sizeQueue(depth int, admin bool, inline int, lim deviceLimits, initiator, srqDepth int) (queueSizes, error) {
	sz := queueSizes{depth: depth, srqDepth: srqDepth, nreq: 2 * depth, inline: inline, recvWR: depth, maxRead: initiator}
	recvCQE := sz.recvWR
	if srqDepth > 0 {
		recvCQE = srqDepth
	}
	sz.sendWR = max(2*sz.nreq+1, minSendWR)
	sz.sendWR = min(sz.sendWR, lim.maxQPWR, lim.maxCQE-recvCQE)
	if srqDepth > 0 && sz.sendWR < minSendWR {
		return sz, fmt.Errorf("a queue pair on a shared receive queue of %d entries needs a completion queue of at least %d entries; the device allows %d: lower rdma.receive_queue_depth",
			srqDepth, srqDepth+minSendWR, lim.maxCQE)
	}
	if sz.recvWR > lim.maxQPWR || sz.sendWR < minSendWR {
		return sz, fmt.Errorf("a queue of %d entries needs %d receive and at least %d send work requests and a completion queue for both; the device allows %d work requests and %d completion queue entries: lower max_queue_size",
			depth, sz.recvWR, minSendWR, lim.maxQPWR, lim.maxCQE)
	}
	sz.cqe = sz.sendWR + recvCQE
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
	log := l.log.WithFields(logrus.Fields{"qid": req.QID, "peer": peer})
	ring, err := dev.sharedRing(inline, req.QID == 0)
	if err != nil {
		log.WithError(err).Warn("no shared receive queue; this queue pair gets its own receive buffers")
	}
	srqDepth := 0
	if ring != nil {
		srqDepth = len(ring.cmd)
	}
	sz, err := sizeQueue(req.RecvDepth(), req.QID == 0, inline, lim, initiator, srqDepth)
	if err != nil && ring != nil {
		// Its completion queue cannot hold the shared receive queue:
		// its own ring it can.
		log.WithError(err).Warn("this queue pair gets its own receive buffers")
		ring = nil
		sz, err = sizeQueue(req.RecvDepth(), req.QID == 0, inline, lim, initiator, 0)
	}
	if err != nil {
		return nil, err
	}
	qp := &QueuePair{
		l: l, id: id, dev: dev, peer: peer, qid: req.QID,
		port:    int(C.nt_id_port(id)),
		sendInv: dev.caps().sendInvalidate,
		done:    make(chan struct{}),
		eventfd: -1,
		rspUnit: -1,
		spin:    fabrics.Spin{Window: spinWindow},
		rq:      ring,
		log:     log,
	}
	if h := pollHook.Load(); h != nil {
		qp.hook = *h
	}
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
	if err := qp.takeMemory(sz); err != nil {
		return err
	}
	if err := qp.createVerbs(sz); err != nil {
		return err
	}
	var err error
	// Every completion of a pass may produce a receive, a write and a send.
	if qp.wrs, qp.wrsPtr, err = newBatch(3*sz.nreq + 3*pollBatch); err != nil {
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
	if !qp.ownRing {
		return nil // the shared receive queue is posted already
	}
	for i := range qp.rq.cmd {
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
	qp.cq, err = C.ibv_create_cq(qp.dev.ctx, C.int(sz.cqe), nil, qp.cc, C.int(qp.dev.compVector()))
	if qp.cq == nil {
		return fmt.Errorf("create completion queue of %d entries: %w", sz.cqe, err)
	}
	recvSGE, srq := 1, qp.rq.srq
	if sz.inline > 0 {
		recvSGE = 2
	}
	if ret := C.nt_create_qp(qp.id, qp.dev.pd, qp.cq, srq, C.int(sz.sendWR), C.int(sz.recvWR), C.int(recvSGE)); ret != 0 {
		return errnoErr(fmt.Sprintf("create queue pair (%d send, %d receive work requests)", sz.sendWR, sz.recvWR), ret)
	}
	qp.qp = C.nt_id_qp(qp.id)
	return nil
}

// start runs the poller.
func (qp *QueuePair) start() { go qp.poll() }

// poll is the queue pair's poller goroutine.
func (qp *QueuePair) poll() {
	// Returns locked: a goroutine that returns locked takes its thread
	// with it. Unlocked, the runtime would keep the thread idle in its
	// pool, one for every queue pair that ever polled. It is unlocked
	// only while parked (fabrics.Parker), and a pinned one never, so that
	// its CPU mask does not pass to whatever ran on the thread next.
	runtime.LockOSThread()
	if cpus := qp.dev.settings.PollerCPUs; len(cpus) > 0 {
		if err := pinPoller(cpus); err != nil {
			qp.log.WithError(err).Warn("poller left unpinned")
		}
	}
	qp.awake = time.Now()
	defer func() { pollerBusy.Add(int64(time.Since(qp.awake))) }()
	for !qp.stopped() {
		if qp.pollOnce() > 0 {
			qp.spin.Worked()
			continue
		}
		if qp.spin.Idle() {
			qp.sleep()
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
		qp.handleWC(&qp.wcs[i])
	}
	if qp.srqDelta > srqFoldEvery || qp.srqDelta < -srqFoldEvery {
		qp.foldSRQ()
	}
	n += qp.runWaiting()
	if err := qp.flushPosts(); err != nil {
		qp.log.WithError(err).Error("posting work requests failed; disconnecting the queue")
		qp.Disconnect()
	}
	return n
}

// runWaiting runs the requests that waited, as what they waited for came:
// a block granted, backend work done, a fence's recheck, their queue
// pair's own blocks back. It returns how much it ran, parked requests
// aside.
func (qp *QueuePair) runWaiting() int {
	n := 0
	if len(qp.granted) > 0 {
		qp.runGrants()
		n++
	}
	if qp.fq.Pending() {
		qp.fq.Reap()
		n++
	}
	if qp.recheck.Load() {
		qp.recheckWaiting()
	}
	if len(qp.parked) > 0 {
		qp.runParked()
	}
	return n
}

// sleep arms the completion queue and blocks until a completion event, a
// wake from a backend worker, or a stop. Arming and the poll that must
// follow it are one C call, as are taking the event and the next poll.
func (qp *QueuePair) sleep() {
	if qp.stopped() {
		return
	}
	qp.spill()
	qp.dropWaitBufs()
	qp.foldSRQ()
	qp.sleeping.Store(true)
	n := int(C.nt_arm_poll(qp.cq, (*C.struct_nt_wc)(qp.wcsPtr), pollBatch))
	if n < 0 {
		qp.sleeping.Store(false)
		qp.log.WithError(unix.Errno(-n)).Error("arming the completion queue failed; disconnecting the queue")
		qp.Disconnect()
		return
	}
	if n > 0 || qp.fq.Pending() || len(qp.granted) > 0 || qp.recheck.Load() || qp.stopping.Load() {
		qp.sleeping.Store(false)
		qp.process(n)
		return
	}
	fds := [2]unix.PollFd{{Fd: int32(qp.cc.fd), Events: unix.POLLIN}, {Fd: int32(qp.eventfd), Events: unix.POLLIN}}
	slept := time.Now()
	pollerBusy.Add(int64(slept.Sub(qp.awake)))
	timeout := -1
	if qp.spin.Parks() && qp.idle.Park(qp.log, len(qp.dev.settings.PollerCPUs) > 0, int(qp.cc.fd), qp.eventfd) {
		timeout = 0 // what woke it, without waiting
	}
	_, err := unix.Poll(fds[:], timeout)
	qp.awake = time.Now()
	pollerIdle.Add(int64(qp.awake.Sub(slept)))
	qp.spin.Slept(qp.awake.Sub(slept))
	qp.sleeping.Store(false)
	if err != nil && err != unix.EINTR {
		qp.log.WithError(err).Error("poll on completion channel failed; disconnecting the queue")
		qp.Disconnect()
		return
	}
	if qp.stopped() {
		return // teardown polls what came
	}
	if fds[1].Revents != 0 {
		var b [8]byte
		unix.Read(qp.eventfd, b[:])
	}
	if fds[0].Revents != 0 {
		qp.process(int(C.nt_event_poll(qp.cc, qp.cq, (*C.struct_nt_wc)(qp.wcsPtr), pollBatch)))
	}
}

// srqFoldEvery is how far a busy poller's count of shared receive queue
// entries may drift before it folds it into the ring's: one atomic add
// per that many receives, not one per command, so the count is off by at
// most this much per busy queue pair, and exact once pollers sleep.
const srqFoldEvery = 64

// handleWC handles one completion, counting the receives.
func (qp *QueuePair) handleWC(wc *C.struct_nt_wc) {
	if uint64(wc.wr_id)&kindMask == kindRecv {
		qp.srqDelta--
	}
	qp.handle(wc)
}

// foldSRQ folds the poller's count of shared receive queue entries into
// the ring's.
func (qp *QueuePair) foldSRQ() {
	if qp.rq.shared() {
		qp.rq.fold(qp.srqDelta)
	}
	qp.srqDelta = 0
}

// stopped reports whether the poller is to stop and tear down. A test's
// hook runs first: it can hold the poller before it polls, so that
// completions wait in the completion queue.
func (qp *QueuePair) stopped() bool {
	if qp.hook != nil {
		qp.hook(qp)
	}
	return qp.stopping.Load()
}

// pollHook is set by tests only; each queue pair takes it at set-up.
var pollHook atomic.Pointer[func(*QueuePair)]

// Wake implements fabrics.QueueTransport.
func (qp *QueuePair) Wake() {
	if qp.sleeping.Load() {
		qp.kick()
	}
}

// EventFD implements fabrics.EventFDer: the queue's io_uring signals
// completions on the eventfd the poller sleeps on.
func (qp *QueuePair) EventFD() int { return qp.eventfd }

func (qp *QueuePair) kick() {
	one := [8]byte{1}
	unix.Write(qp.eventfd, one[:])
}

// Peer implements fabrics.QueueTransport.
func (qp *QueuePair) Peer() string { return qp.peer }

// TRType implements fabrics.QueueTransport.
func (qp *QueuePair) TRType() uint8 { return nvme.TransportRDMA }

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
	if qp.pool != nil {
		qp.pool.stop(qp) // its waiters and grants go to live queue pairs now
	}
	qp.kick()
}

// teardown runs on the poller once it stops, in reverse order of set-up:
// fabrics lets go of the queue; the queue pair goes to the error state,
// drains and is destroyed before its requests, data buffers and shared
// receive queue entries go back (drain.go); then the completion queue,
// channel and memory are freed, then the queue pair's hold on its device
// and its CM id, and last its hold on the listener's event channel, which
// outlives it.
func (qp *QueuePair) teardown() {
	qp.mu.Lock()
	if !qp.discDone {
		qp.discDone = true
		C.rdma_disconnect(qp.id)
	}
	qp.mu.Unlock()
	qp.spill() // Close may wait long for the backend
	qp.fq.Close()
	qp.drain()
	qp.place.Release()
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
	qp.idle.Close()
	qp.destroyQP()
	if qp.cq != nil {
		C.ibv_destroy_cq(qp.cq)
		qp.cq = nil
	}
	if qp.cc != nil {
		C.ibv_destroy_comp_channel(qp.cc)
		qp.cc = nil
	}
	qp.freeMemory()
	freeBatch(qp.wrs, qp.wrsPtr)
	qp.wrsPtr, qp.wrs = nil, nil
	if qp.wcsPtr != nil {
		C.free(qp.wcsPtr)
		qp.wcsPtr, qp.wcs = nil, nil
	}
	if qp.eventfd >= 0 {
		unix.Close(qp.eventfd)
		qp.eventfd = -1
	}
}

// overrun records a host that sent a command with every request of its
// queue in use: more commands than the queue size it connected with
// (HSQSIZE) allows. The caller drops the queue; on a shared receive queue
// such a host would otherwise take the entries every host shares.
func (qp *QueuePair) overrun() {
	countOverrun(qp.l.port.ID)
	qp.log.WithField("requests", len(qp.reqs)).
		Warn("host sent more commands than its queue size allows; disconnecting the queue (nvmeof_tgt_rdma_queue_overruns_total)")
}
