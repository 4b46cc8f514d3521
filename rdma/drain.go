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
// posted work requests. A device that never completes them (a failed post
// left some unposted) does not hold the queue pair for ever: destroying
// the queue pair stops its DMA all the same.
const drainTimeout = 5 * time.Second

// drain runs at teardown, once fabrics.Queue.Close returned, so that
// fabrics holds none of the queue pair's requests. As SPDK's rdma
// transport does before it destroys a queue pair, it moves the queue pair
// to the error state, which makes the device complete every posted work
// request, and polls until no request is on the wire; then every other
// request and its data buffer go back, and it checks that all came home.
func (qp *QueuePair) drain() {
	qp.flushPosts() // the last pass's batch is dropped, and its requests go back
	qp.toError()
	deadline := time.Now().Add(drainTimeout)
	for qp.inState[stateReading]+qp.inState[stateSending] > 0 {
		n := qp.pollDrain(time.Until(deadline))
		if n < 0 {
			break
		}
		for i := range n {
			qp.handle(&qp.wcs[i])
		}
		if n == 0 && time.Now().After(deadline) {
			qp.log.WithFields(logrus.Fields{
				"reading": qp.inState[stateReading], "sending": qp.inState[stateSending],
			}).Warn("posted work requests not flushed in time; freeing the queue pair anyway")
			break
		}
	}
	// No grant comes after forget; the ones that came go back.
	qp.pool.forget(qp)
	qp.runGrants()
	qp.releaseAll()
	qp.flushPosts() // receive buffers of the shared receive queue go back
	if !qp.accounted() {
		invalidTransitions.Add(1)
		qp.log.WithFields(logrus.Fields{
			"free_requests": len(qp.freeReqs), "requests": len(qp.reqs), "held_buffers": qp.held,
		}).Error("requests or data buffers unaccounted for at teardown")
	}
	qp.spill()
}

// pollDrain polls a batch of completions, waiting up to wait on the
// completion channel when there is none yet.
func (qp *QueuePair) pollDrain(wait time.Duration) int {
	if n := int(C.nt_arm_poll(qp.cq, (*C.struct_nt_wc)(qp.wcsPtr), pollBatch)); n != 0 {
		return n
	}
	fds := [1]unix.PollFd{{Fd: int32(qp.cc.fd), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds[:], max(int(wait/time.Millisecond), 0)); err != nil && err != unix.EINTR {
		return -1
	}
	return int(C.nt_event_poll(qp.cc, qp.cq, (*C.struct_nt_wc)(qp.wcsPtr), pollBatch))
}

// releaseAll returns every request not yet free: at teardown, after the
// ones on the wire drained.
func (qp *QueuePair) releaseAll() {
	for i := range qp.reqs {
		if r := &qp.reqs[i]; r.state != stateFree {
			qp.release(r)
		}
	}
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
