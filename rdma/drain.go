package rdma

/*
#include "verbs.h"
*/
import "C"

import (
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// drainTimeout bounds how long teardown waits for the device to flush
// posted work requests and, on a shared receive queue, to report the
// queue pair's last receive. A device that never completes them (a failed
// post left some unposted) does not hold the queue pair for ever:
// destroying the queue pair stops its DMA all the same, and the buffers go
// back only after that.
const drainTimeout = 5 * time.Second

// lastWQETimeout bounds the wait for IBV_EVENT_QP_LAST_WQE_REACHED on a
// device that has never raised one: some drivers (older soft-RoCE) do
// not. After one such wait the device's later teardowns rely on the
// completion queue alone (device.noLastWQE).
const lastWQETimeout = time.Second

// drainSteps is what drainQueue does to a queue pair; the tests stand in
// for the device.
type drainSteps interface {
	// poll handles a batch of completions, waiting up to wait for the
	// first; it returns how many, or -1 if polling failed.
	pollCQ(wait time.Duration) int
	// settled reports whether the device is done with the queue pair:
	// no request's work requests are on the wire and, on a shared
	// receive queue, it took its last receive (LAST_WQE_REACHED).
	settled() bool
	destroyQP()
	// releaseAll gives back every request, data block and receive
	// buffer the queue pair holds.
	releaseAll()
}

// drainQueue tears down a queue pair in the error state in the order
// ibv_destroy_qp(3) asks for, as SPDK's rdma transport does: it polls
// until the device is done with the queue pair and its completion queue
// is empty, destroys the queue pair, polls what the device completed
// before that, and only then gives back buffers, which no DMA can reach
// any more. Receive completions count as much as sends: on a shared
// receive queue each one is an entry every host shares. At the deadline
// (or if polling fails) the queue pair is destroyed all the same, and its
// buffers still go back only after that. It reports whether the device
// settled in time.
func drainQueue(s drainSteps, deadline time.Time, now func() time.Time) bool {
	settled := false
	for {
		n := s.pollCQ(0)
		if n < 0 {
			break
		}
		if n > 0 {
			continue
		}
		if s.settled() {
			settled = true
			break
		}
		left := deadline.Sub(now())
		if left <= 0 || s.pollCQ(left) < 0 {
			break
		}
	}
	s.destroyQP()
	// Destroyed: no completion comes after these.
	for s.pollCQ(0) > 0 {
	}
	s.releaseAll()
	return settled
}

// drain runs at teardown, once fabrics.Queue.Close returned, so that
// fabrics holds none of the queue pair's requests: the last pass's batch
// is dropped (its requests go back), the queue pair moves to the error
// state, which makes the device complete every posted work request, and
// drainQueue does the rest. Then it checks that everything came home.
func (qp *QueuePair) drain() {
	qp.flushPosts()
	qp.toError()
	began := time.Now()
	qp.lastWQEBy = began.Add(lastWQETimeout)
	if !drainQueue(qp, began.Add(drainTimeout), time.Now) {
		qp.log.WithFields(logrus.Fields{
			"reading": qp.inState[stateReading], "sending": qp.inState[stateSending], "last_wqe": qp.lastWQE.Load(),
		}).Warn("the device did not flush the queue pair in time; destroyed it before giving its buffers back (shared receive queue entries it took may be lost: watch nvmeof_tgt_rdma_srq_limit_events_total)")
	}
	if !qp.accounted() {
		invalidTransitions.Add(1)
		qp.log.WithFields(logrus.Fields{
			"free_requests": len(qp.freeReqs), "requests": len(qp.reqs), "held_buffers": qp.held,
		}).Error("requests or data buffers unaccounted for at teardown")
	}
	qp.spill()
}

// pollCQ implements drainSteps.
func (qp *QueuePair) pollCQ(wait time.Duration) int {
	var n int
	if wait <= 0 {
		n = int(C.nt_poll(qp.cq, (*C.struct_nt_wc)(qp.wcsPtr), pollBatch))
	} else {
		n = qp.pollDrain(min(wait, qp.lastWQEWait()))
	}
	for i := range max(n, 0) {
		qp.handleWC(&qp.wcs[i])
	}
	return n
}

// settled implements drainSteps.
func (qp *QueuePair) settled() bool {
	if qp.inState[stateReading]+qp.inState[stateSending] > 0 {
		return false
	}
	if !qp.rq.shared() || qp.lastWQE.Load() || qp.dev.noLastWQE.Load() {
		return true
	}
	if qp.dev.lastWQESeen.Load() || time.Now().Before(qp.lastWQEBy) {
		return false
	}
	// The device has never raised it: its completion queue, empty now,
	// is all there is to go by.
	if qp.dev.noLastWQE.CompareAndSwap(false, true) {
		qp.dev.log.Info("the device does not report the last receive of a queue pair on a shared receive queue (IBV_EVENT_QP_LAST_WQE_REACHED); its queue pairs are destroyed once their completion queue is empty")
	}
	return true
}

// lastWQEWait is how long a drain may sleep before settled must look at
// the clock again: until the LAST_WQE_REACHED deadline of a device not
// known to raise it.
func (qp *QueuePair) lastWQEWait() time.Duration {
	if !qp.rq.shared() || qp.lastWQE.Load() || qp.dev.lastWQESeen.Load() || qp.dev.noLastWQE.Load() {
		return drainTimeout
	}
	return max(time.Until(qp.lastWQEBy), time.Millisecond)
}

// destroyQP implements drainSteps: the device is done with the queue
// pair's memory once it returns.
func (qp *QueuePair) destroyQP() {
	if qp.qp == nil {
		return
	}
	qp.dev.unwatch(qp)
	C.rdma_destroy_qp(qp.id)
	qp.qp = nil
}

// releaseAll implements drainSteps: every request not yet free goes back
// with its data block and receive buffer, then the shared receive queue
// entries are posted again and the queue pair's count of them folded into
// the device's.
func (qp *QueuePair) releaseAll() {
	// No grant comes after forget; the ones that came go back.
	qp.pool.forget(qp)
	qp.runGrants()
	for i := range qp.reqs {
		if r := &qp.reqs[i]; r.state != stateFree {
			qp.release(r)
		}
	}
	if err := qp.flushPosts(); err != nil {
		qp.log.WithError(err).Error("reposting receive buffers to the shared receive queue failed; they are lost until restart (nvmeof_tgt_rdma_srq_posted_entries)")
	}
	qp.foldSRQ()
}

// pollDrain polls a batch of completions, waiting up to wait on the
// completion channel (or a wake, as LAST_WQE_REACHED's) when there is
// none yet.
func (qp *QueuePair) pollDrain(wait time.Duration) int {
	if n := int(C.nt_arm_poll(qp.cq, (*C.struct_nt_wc)(qp.wcsPtr), pollBatch)); n != 0 {
		return n
	}
	fds := [2]unix.PollFd{{Fd: int32(qp.cc.fd), Events: unix.POLLIN}, {Fd: int32(qp.eventfd), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds[:], max(int(wait/time.Millisecond), 0)); err != nil && err != unix.EINTR {
		return -1
	}
	if fds[1].Revents != 0 {
		var b [8]byte
		unix.Read(qp.eventfd, b[:])
	}
	if fds[0].Revents == 0 {
		return int(C.nt_poll(qp.cq, (*C.struct_nt_wc)(qp.wcsPtr), pollBatch))
	}
	return int(C.nt_event_poll(qp.cc, qp.cq, (*C.struct_nt_wc)(qp.wcsPtr), pollBatch))
}

// accounted reports whether every request is free and every data buffer
// back in its pool.
func (qp *QueuePair) accounted() bool {
	return qp.buffersHome() && len(qp.freeReqs) == len(qp.reqs) && int(qp.inState[stateFree]) == len(qp.reqs)
}

// toError moves the queue pair to the error state, so that the device
// flushes what is posted. rdma_disconnect did so already on RoCE and
// InfiniBand; not on iWARP, and not if it failed.
func (qp *QueuePair) toError() {
	if qp.qp == nil {
		return
	}
	if ret := C.nt_qp_to_error(qp.qp); ret != 0 {
		qp.log.WithError(unix.Errno(ret)).Debug("moving the queue pair to the error state failed")
	}
}
