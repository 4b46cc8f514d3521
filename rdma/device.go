package rdma

/*
#include <stdlib.h>
#include "verbs.h"
*/
import "C"

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// device is one RDMA device (an ibv_context) in use by queue pairs and
// listening ids: what
// the transport needs of its attributes, the protection domain its queue
// pairs share, and the one reader of its asynchronous events. It lives
// while anything uses it, so that a removed device is let go (and its
// removal can complete) once its queue pairs and listening ids are gone.
type device struct {
	ctx   *C.struct_ibv_context
	name  string
	info  C.struct_nt_device_info
	pd    *C.struct_ibv_pd
	users int // queue pairs and listening ids; guarded by devicesMu
	// removed: rdma_cm reported the device removed. The last user then
	// lets go of the context librdmacm keeps open. Guarded by devicesMu.
	removed bool

	// For the event reader: which queue pair a QP or CQ event is about.
	// Guarded by devicesMu.
	qps map[*C.struct_ibv_qp]*QueuePair
	cqs map[*C.struct_ibv_cq]*QueuePair

	stopfd int
	done   chan struct{}
	log    *logrus.Entry

	// Registered when the device is set up, shared by its queue pairs:
	// data buffers, response capsules, and shared receive queues by
	// in-capsule size (ringsMu).
	pool     *dataPool
	ctl      *dataPool
	settings Settings
	ringsMu  sync.Mutex
	rings    map[int]*recvRing
	// nextVector spreads completion queues over the completion vectors.
	nextVector atomic.Uint32
	// lastWQESeen: the device raises IBV_EVENT_QP_LAST_WQE_REACHED.
	// noLastWQE: a teardown waited for one in vain and none ever came,
	// so later ones do not wait (drain.go).
	lastWQESeen, noLastWQE atomic.Bool
}

var (
	// devicesMu guards the registry and each device's maps and users.
	devicesMu sync.Mutex
	devices   = map[*C.struct_ibv_context]*device{}
	// lifecycleMu orders a device's start against its stop, so a device
	// never has two event readers. The event reader never takes it.
	lifecycleMu sync.Mutex
)

// acquireDevice returns the device of ctx with one more user, setting it
// up on first use.
func acquireDevice(ctx *C.struct_ibv_context, log *logrus.Entry) (*device, error) {
	lifecycleMu.Lock()
	defer lifecycleMu.Unlock()
	devicesMu.Lock()
	if d := devices[ctx]; d != nil {
		d.users++
		devicesMu.Unlock()
		return d, nil
	}
	devicesMu.Unlock()

	d := &device{ctx: ctx, stopfd: -1, done: make(chan struct{}),
		qps: map[*C.struct_ibv_qp]*QueuePair{}, cqs: map[*C.struct_ibv_cq]*QueuePair{}}
	if ret := C.nt_device_info(ctx, &d.info); ret != 0 {
		return nil, errnoErr("query device", ret)
	}
	d.name = C.GoString(&d.info.name[0])
	d.log = log.WithField("device", d.name)
	if ret := C.nt_set_nonblock(C.nt_async_fd(ctx)); ret != 0 {
		return nil, errnoErr("device "+d.name+": async event fd non-blocking", ret)
	}
	var err error
	if d.pd, err = C.ibv_alloc_pd(ctx); d.pd == nil {
		return nil, fmt.Errorf("device %s: allocate protection domain: %w", d.name, err)
	}
	if err := d.registerPools(); err != nil {
		C.ibv_dealloc_pd(d.pd)
		return nil, fmt.Errorf("device %s: %w", d.name, err)
	}
	if d.stopfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		d.freePools()
		C.ibv_dealloc_pd(d.pd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	d.users = 1
	devicesMu.Lock()
	devices[ctx] = d
	devicesMu.Unlock()
	go d.readEvents()
	return d, nil
}

// markDeviceRemoved records that rdma_cm reported ctx's device removed.
func markDeviceRemoved(ctx *C.struct_ibv_context) {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	if d := devices[ctx]; d != nil {
		d.removed = true
	}
}

// release drops one user; the last one stops the event reader and frees
// the protection domain, and, for a removed device, closes the context's
// files. Callers release before they destroy their CM id: while an id is
// bound to the context, librdmacm cannot free it under us.
func (d *device) release() {
	lifecycleMu.Lock()
	defer lifecycleMu.Unlock()
	devicesMu.Lock()
	d.users--
	last := d.users == 0
	if last {
		delete(devices, d.ctx)
	}
	devicesMu.Unlock()
	if !last {
		return
	}
	one := [8]byte{1}
	unix.Write(d.stopfd, one[:])
	<-d.done
	unix.Close(d.stopfd)
	d.freePools()
	C.ibv_dealloc_pd(d.pd)
	devicesMu.Lock()
	removed := d.removed
	devicesMu.Unlock()
	if removed {
		if ret := C.nt_release_removed_context(d.ctx); ret != 0 {
			d.log.WithError(errnoErr("close", ret)).Error("cannot let go of the removed device; its removal waits until the daemon exits")
			return
		}
		d.log.Info("let go of the removed RDMA device")
	}
}

// registerPools registers the memory every queue pair of the device
// shares, so that connecting a queue registers none.
func (d *device) registerPools() error {
	d.settings = currentSettings()
	d.rings = map[int]*recvRing{}
	mem, err := registerRegion(d.pd, int(d.settings.BufferPool), d.caps().regionAccess())
	if err != nil {
		return fmt.Errorf("buffer pool: %w", err)
	}
	d.pool = newDataPool(mem)
	if mem, err = registerRegion(d.pd, controlPool, 0); err != nil {
		d.freePools()
		return fmt.Errorf("response buffers: %w", err)
	}
	d.ctl = newDataPool(mem)
	return nil
}

func (d *device) freePools() {
	d.ringsMu.Lock()
	for _, r := range d.rings {
		r.free()
	}
	d.rings = nil
	d.ringsMu.Unlock()
	for _, p := range []*dataPool{d.pool, d.ctl} {
		if p != nil {
			p.mem.free()
		}
	}
	d.pool, d.ctl = nil, nil
}

// sharedRing returns the device's shared receive queue for in-capsule
// size inline, created on first use (when a port listens), or nil where
// SRQs are off or the device has none: queue pairs then get their own.
func (d *device) sharedRing(inline int, admin bool) (*recvRing, error) {
	if !d.settings.SharedReceiveQueue || d.info.max_srq <= 0 || (inline > 0 && d.info.max_srq_sge < 2) {
		return nil, nil
	}
	key := inline
	if admin {
		key = -1 - inline
	}
	d.ringsMu.Lock()
	defer d.ringsMu.Unlock()
	if r := d.rings[key]; r != nil {
		return r, nil
	}
	n := min(d.settings.ReceiveQueueDepth, int(d.info.max_srq_wr))
	if admin {
		n = min(adminRingDepth, int(d.info.max_srq_wr))
	}
	r, err := newSharedRing(d, n, inline, admin)
	if err != nil {
		return nil, err
	}
	d.rings[key] = r
	d.log.WithFields(logrus.Fields{"entries": n, "inline_data_size": inline, "admin": admin}).Info("shared receive queue ready")
	return r, nil
}

// compVector is the completion vector of the next completion queue.
func (d *device) compVector() int {
	n := max(int(d.info.num_comp_vectors), 1)
	return int(d.nextVector.Add(1)-1) % n
}

// watch routes the asynchronous events of qp's verbs objects to it.
func (d *device) watch(qp *QueuePair) {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	d.qps[qp.qp] = qp
	d.cqs[qp.cq] = qp
}

func (d *device) unwatch(qp *QueuePair) {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	delete(d.qps, qp.qp)
	delete(d.cqs, qp.cq)
}

// readEvents reads the device's asynchronous events until release.
func (d *device) readEvents() {
	defer close(d.done)
	_, rawPtr, err := cArray[C.struct_ibv_async_event](1)
	if err != nil {
		d.log.WithError(err).Error("cannot read the device's async events; device errors now show only as failed work requests")
		waitEventfd(d.stopfd)
		return
	}
	defer C.free(rawPtr)
	fds := []unix.PollFd{{Fd: int32(C.nt_async_fd(d.ctx)), Events: unix.POLLIN}, {Fd: int32(d.stopfd), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			d.log.WithError(err).Error("poll on the device's async event fd failed; device errors now show only as failed work requests")
			waitEventfd(d.stopfd)
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0 && fds[0].Revents&unix.POLLIN == 0 {
			// The device is gone; its queue pairs hear of it through
			// rdma_cm. Wait for the last of them to let go.
			waitEventfd(d.stopfd)
			return
		}
		for {
			var ev C.struct_nt_async_event
			if C.nt_get_async_event(d.ctx, (*C.struct_ibv_async_event)(rawPtr), &ev) != 0 {
				break // EAGAIN: drained
			}
			d.dispatch(&ev)
			C.ibv_ack_async_event((*C.struct_ibv_async_event)(rawPtr))
		}
	}
}

// waitEventfd blocks until fd (an eventfd) is written.
func waitEventfd(fd int) {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != unix.EINTR {
			return
		}
	}
}

// dispatch disconnects the queue pairs an event makes unusable: a QP in
// the error state, a CQ that overflowed, a port or the device down. The
// host reconnects; the queue's other resources are freed as usual.
func (d *device) dispatch(ev *C.struct_nt_async_event) {
	name := C.GoString(C.ibv_event_type_str(C.enum_ibv_event_type(ev._type)))
	countDeviceEvent(d.name, name)
	switch int(ev._type) {
	case evLastWQE:
		d.lastWQEReached(ev.qp)
		return
	case evSRQLimit:
		d.srqLimitReached(ev.srq)
		return
	case evSRQErr:
		d.srqFailed(ev.srq)
		return
	}
	var victims []*QueuePair
	devicesMu.Lock()
	switch asyncEventScope(int(ev._type)) {
	case scopeQP:
		if qp := d.qps[ev.qp]; qp != nil {
			victims = append(victims, qp)
		}
	case scopeCQ:
		if qp := d.cqs[ev.cq]; qp != nil {
			victims = append(victims, qp)
		}
	case scopePort:
		for _, qp := range d.qps {
			if qp.port == int(ev.port) {
				victims = append(victims, qp)
			}
		}
	case scopeDevice:
		victims = slicesOf(d.qps)
	}
	devicesMu.Unlock()
	if len(victims) == 0 {
		d.log.WithFields(logrus.Fields{"event": name, "port_num": int(ev.port)}).Info("device event")
		return
	}
	d.log.WithFields(logrus.Fields{"event": name, "port_num": int(ev.port), "queue_pairs": len(victims)}).
		Warn("device event: disconnecting the affected queue pairs (hosts reconnect)")
	for _, qp := range victims {
		qp.Disconnect()
	}
}

// lastWQEReached tells the queue pair qp, which is going to the error
// state, that it takes no more receives from its shared receive queue:
// its teardown waits for this before it destroys it (drain.go). Every
// teardown of a queue pair on a shared receive queue raises one, so it is
// no news. The wake happens under devicesMu: teardown unwatches the queue
// pair before it closes the eventfd.
func (d *device) lastWQEReached(qp *C.struct_ibv_qp) {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	d.lastWQESeen.Store(true)
	q := d.qps[qp]
	if q == nil {
		d.log.Debug("last WQE reached for a queue pair already gone")
		return
	}
	q.log.Debug("last WQE reached")
	q.lastWQE.Store(true)
	q.kick()
}

// ringOf returns the shared ring of srq, or nil.
func (d *device) ringOf(srq *C.struct_ibv_srq) *recvRing {
	d.ringsMu.Lock()
	defer d.ringsMu.Unlock()
	for _, r := range d.rings {
		if r.srq == srq {
			return r
		}
	}
	return nil
}

// srqLimitReached: fewer than an eighth of a shared receive queue's
// entries are posted. Hosts are about to wait on receiver-not-ready
// retries, which they do silently, so it is counted, and said once in
// words. Every entry the transport holds goes back on its own as its
// command completes (a receive with in-capsule data is reposted when the
// response is sent): there is nothing held back to post here. The limit
// is armed again once the queue has recovered (recvRing.fold).
func (d *device) srqLimitReached(srq *C.struct_ibv_srq) {
	countSRQEvent(d.name, false)
	r := d.ringOf(srq)
	if r == nil {
		return
	}
	r.armed.Store(false)
	log := d.log.WithFields(logrus.Fields{"queue": r.queueName(), "entries": len(r.cmd), "posted": r.posted.Load()})
	if r.warned.CompareAndSwap(false, true) {
		log.Warn("shared receive queue nearly empty: hosts wait on receiver-not-ready retries; raise rdma.receive_queue_depth (commands in flight over all hosts of the device)")
		return
	}
	log.Debug("shared receive queue nearly empty")
}

// srqFailed: the device reports a shared receive queue broken. Its queue
// pairs are disconnected; the hosts reconnect, but to the same queue.
func (d *device) srqFailed(srq *C.struct_ibv_srq) {
	countSRQEvent(d.name, true)
	r := d.ringOf(srq)
	var victims []*QueuePair
	devicesMu.Lock()
	for _, qp := range d.qps {
		if r != nil && qp.rq == r {
			victims = append(victims, qp)
		}
	}
	devicesMu.Unlock()
	d.log.WithField("queue_pairs", len(victims)).
		Error("shared receive queue error: disconnecting its queue pairs; if it repeats, restart the daemon or set rdma.shared_receive_queue: false")
	for _, qp := range victims {
		qp.Disconnect()
	}
}

// eventScope is what an asynchronous event makes unusable.
type eventScope int

const (
	scopeNone   eventScope = iota // informational (COMM_EST, PORT_ACTIVE, ...)
	scopeQP                       // the queue pair is in the error state
	scopeCQ                       // the completion queue overflowed or failed
	scopePort                     // the port is down: its queue pairs
	scopeDevice                   // the device failed: all its queue pairs
)

// Event types, as Go constants for the tests.
const (
	evQPFatal     = int(C.IBV_EVENT_QP_FATAL)
	evQPReqErr    = int(C.IBV_EVENT_QP_REQ_ERR)
	evQPAccessErr = int(C.IBV_EVENT_QP_ACCESS_ERR)
	evPathMigErr  = int(C.IBV_EVENT_PATH_MIG_ERR)
	evCQErr       = int(C.IBV_EVENT_CQ_ERR)
	evPortErr     = int(C.IBV_EVENT_PORT_ERR)
	evPortActive  = int(C.IBV_EVENT_PORT_ACTIVE)
	evDeviceFatal = int(C.IBV_EVENT_DEVICE_FATAL)
	evCommEst     = int(C.IBV_EVENT_COMM_EST)
	evLastWQE     = int(C.IBV_EVENT_QP_LAST_WQE_REACHED)
	evSRQLimit    = int(C.IBV_EVENT_SRQ_LIMIT_REACHED)
	evSRQErr      = int(C.IBV_EVENT_SRQ_ERR)
)

func asyncEventScope(typ int) eventScope {
	switch typ {
	case evQPFatal, evQPReqErr, evQPAccessErr, evPathMigErr:
		return scopeQP
	case evCQErr:
		return scopeCQ
	case evPortErr:
		return scopePort
	case evDeviceFatal:
		return scopeDevice
	}
	return scopeNone
}

func slicesOf(m map[*C.struct_ibv_qp]*QueuePair) []*QueuePair {
	out := make([]*QueuePair, 0, len(m))
	for qp := range maps.Values(m) {
		out = append(out, qp)
	}
	return out
}

// deviceCaps are the device facts that change what the transport posts.
type deviceCaps struct {
	iwarp          bool
	sendInvalidate bool // IBV_DEVICE_MEM_MGT_EXTENSIONS
}

func (d *device) caps() deviceCaps {
	return deviceCaps{iwarp: d.info.iwarp != 0, sendInvalidate: d.info.mem_mgt_ext != 0}
}

const accessRemoteWrite = int(C.IBV_ACCESS_REMOTE_WRITE)

// regionAccess is the access a queue pair's region needs beyond local
// write. On iWARP the data of an RDMA READ lands in the sink as the peer's
// RDMA WRITE would, so the sink must be remotely writable; InfiniBand and
// RoCE need no remote access, and granting none is safer.
func (c deviceCaps) regionAccess() C.int {
	if c.iwarp {
		return C.int(accessRemoteWrite)
	}
	return 0
}
