package rdma

/*
#include <stdlib.h>
#include "verbs.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

var (
	registeredBytes atomic.Int64
	// Poller time, summed over queue pairs and updated when a poller goes
	// to sleep or wakes, never per I/O.
	pollerBusy, pollerIdle atomic.Int64
)

// PollerSeconds is the time pollers spent working (busy, including
// spinning on an idle queue) and asleep on their completion channel.
func PollerSeconds() (busy, idle float64) {
	return time.Duration(pollerBusy.Load()).Seconds(), time.Duration(pollerIdle.Load()).Seconds()
}

// RegisteredBytes is the memory currently registered with RDMA devices.
func RegisteredBytes() int64 { return registeredBytes.Load() }

var forkInit sync.Once

// Listener accepts NVMe-oF queue pairs on one port through rdma_cm.
//
// Lifetimes: the CM event channel carries the events of the listening id
// and of every accepted queue pair's id, and rdma_destroy_id writes to it.
// So the channel outlives every queue pair: Close destroys the listening
// id at once (freeing the address for a new listener) but the channel
// only once the last queue pair has destroyed its id. The listening id
// itself may come and go: when its device is removed or its address moves,
// the port listens again, with backoff, once the address has a device.
type Listener struct {
	target *fabrics.Target
	port   *fabrics.Port
	log    *logrus.Entry

	ch     *C.struct_rdma_event_channel
	wakefd int // eventfd: Close, or the last queue pair gone while closing

	// Owned by the run goroutine once Listen returns.
	id      *C.struct_rdma_cm_id // the listening id; nil while its device is gone
	dev     *device              // the listening id's device, held while id is
	retry   time.Duration        // wait before the next listen attempt while id is nil
	retryAt time.Time

	unlistened chan struct{} // closed once Close destroyed the listening id
	done       chan struct{} // closed once the event channel is destroyed

	qps *connTable[*C.struct_rdma_cm_id, *QueuePair]
}

// ErrNoDevice reports that no RDMA device owns the port's address.
var ErrNoDevice = errors.New("no RDMA device owns this address")

// Backoff of listen attempts after the port's device went away.
const (
	relistenFirst = 250 * time.Millisecond
	relistenMax   = 5 * time.Second
)

// Listen starts accepting connections for port.
func Listen(t *fabrics.Target, p *fabrics.Port, log *logrus.Entry) (*Listener, error) {
	forkInit.Do(func() {
		// The daemon may fork (os/exec); keep registered pages out of children.
		C.ibv_fork_init()
	})
	l := &Listener{
		target: t, port: p,
		log:        log.WithField("port", p.ID),
		unlistened: make(chan struct{}),
		done:       make(chan struct{}),
	}
	l.qps = newConnTable[*C.struct_rdma_cm_id, *QueuePair](l.wake)
	var err error
	l.ch, err = C.rdma_create_event_channel()
	if l.ch == nil {
		return nil, fmt.Errorf("create rdma_cm event channel (is rdma_ucm loaded and /dev/infiniband/rdma_cm present?): %w", err)
	}
	if ret := C.nt_set_nonblock(l.ch.fd); ret != 0 {
		C.rdma_destroy_event_channel(l.ch)
		return nil, errnoErr("event channel non-blocking", ret)
	}
	if l.wakefd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		C.rdma_destroy_event_channel(l.ch)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if err := l.listen(); err != nil {
		C.rdma_destroy_event_channel(l.ch)
		unix.Close(l.wakefd)
		return nil, err
	}
	go l.run()
	l.log.WithField("address", fmt.Sprintf("%s:%d", p.Address, p.ServiceID)).Info("listening")
	return l, nil
}

// listen creates the listening id on the port's address.
func (l *Listener) listen() error {
	p := l.port
	caddr := C.CString(p.Address.String())
	cport := C.CString(strconv.Itoa(int(p.ServiceID)))
	defer C.free(unsafe.Pointer(caddr))
	defer C.free(unsafe.Pointer(cport))
	addr := fmt.Sprintf("%s port %d", p.Address, p.ServiceID)
	var id *C.struct_rdma_cm_id
	if ret := C.nt_listen(l.ch, &id, caddr, cport, 128); ret != 0 {
		switch syscall.Errno(-ret) {
		case syscall.EADDRNOTAVAIL, syscall.ENODEV:
			return fmt.Errorf("listen on %s: %w: give the address to an RDMA-capable interface, or create a soft-RoCE link on it (rdma link add rxe0 type rxe netdev IFACE)", addr, ErrNoDevice)
		case syscall.EADDRINUSE:
			return fmt.Errorf("listen on %s: port in use: another target (nvmet or a second nvmeof-tgt) already listens there", addr)
		}
		return errnoErr("listen on "+addr, ret)
	}
	if C.nt_id_verbs(id) == nil {
		C.rdma_destroy_id(id)
		return fmt.Errorf("listen on %s: %w", addr, ErrNoDevice)
	}
	dev, err := acquireDevice(C.nt_id_verbs(id), l.log)
	if err != nil {
		C.rdma_destroy_id(id)
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	l.id, l.dev = id, dev
	// The shared receive queues are registered now, not when a host
	// connects; where there are none, queue pairs get their own.
	for _, admin := range []bool{false, true} {
		inline := int(p.InlineDataSize)
		if admin {
			inline = nvme.ConnectDataSize
		}
		if _, err := dev.sharedRing(inline, admin); err != nil {
			l.log.WithError(err).Warn("no shared receive queue: each queue pair registers its own receive buffers")
		}
	}
	return nil
}

// destroyListenID lets go of the listening id and its device.
func (l *Listener) destroyListenID() {
	if l.id == nil {
		return
	}
	l.dev.release()
	C.rdma_destroy_id(l.id)
	l.id, l.dev = nil, nil
}

// action is what the event loop does with an event's id after the ack:
// rdma_destroy_id waits for the acks of its events.
type action int

const (
	keepID         action = iota
	destroyID             // a refused connection
	dropListenerID        // the listening id lost its device or address
)

// run handles rdma_cm events until Close and the last queue pair are done.
func (l *Listener) run() {
	defer l.finish()
	fds := []unix.PollFd{{Fd: int32(l.ch.fd), Events: unix.POLLIN}, {Fd: int32(l.wakefd), Events: unix.POLLIN}}
	for {
		closing := l.qps.isClosing()
		timeout := -1
		if l.id == nil && !closing {
			timeout = int(max(time.Until(l.retryAt), 0) / time.Millisecond)
		}
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, timeout); err != nil && err != unix.EINTR {
			l.log.WithError(err).Error("poll on rdma_cm channel failed")
			continue
		}
		if fds[1].Revents != 0 {
			var b [8]byte
			unix.Read(l.wakefd, b[:])
		}
		l.drainEvents()
		if l.qps.isClosing() {
			l.unlisten()
			if l.qps.drained() {
				return
			}
			continue
		}
		if l.id == nil && !time.Now().Before(l.retryAt) {
			l.relisten()
		}
	}
}

func (l *Listener) drainEvents() {
	for {
		var ev *C.struct_rdma_cm_event
		var typ, status C.int
		var id *C.struct_rdma_cm_id
		if ret := C.nt_get_event(l.ch, &ev, &typ, &id, &status); ret != 0 {
			return // EAGAIN: drained
		}
		act := l.handleEvent(ev, int(typ), id, int(status))
		C.rdma_ack_cm_event(ev)
		switch act {
		case destroyID:
			C.rdma_destroy_id(id)
		case dropListenerID:
			l.dropListener(int(typ))
		}
	}
}

// unlisten destroys the listening id once Close asked for it.
func (l *Listener) unlisten() {
	select {
	case <-l.unlistened:
		return
	default:
	}
	l.destroyListenID()
	close(l.unlistened)
}

// finish destroys the event channel once no queue pair uses it.
func (l *Listener) finish() {
	C.rdma_destroy_event_channel(l.ch)
	unix.Close(l.wakefd)
	close(l.done)
}

// dropListener lets go of the listening id whose device went away or whose
// address moved, so that the device's removal can complete, and schedules
// listening again.
func (l *Listener) dropListener(typ int) {
	if l.id == nil {
		return
	}
	if typ == C.RDMA_CM_EVENT_DEVICE_REMOVAL {
		markDeviceRemoved(C.nt_id_verbs(l.id))
	}
	l.destroyListenID()
	l.retry = relistenFirst
	l.retryAt = time.Now().Add(l.retry)
	l.log.WithField("event", eventName(typ)).
		Error("the port's RDMA device went away or its address moved: not accepting connections; listening again as soon as the address has an RDMA device")
}

// eventName is rdma_cm's name of an event type, for logs and metrics.
func eventName(typ int) string {
	return C.GoString(C.rdma_event_str(C.enum_rdma_cm_event_type(typ)))
}

// relisten tries to listen again after the port's device went away.
func (l *Listener) relisten() {
	if err := l.listen(); err != nil {
		l.retry = min(2*l.retry, relistenMax)
		l.retryAt = time.Now().Add(l.retry)
		l.log.WithError(err).WithField("retry_in", l.retry.String()).Debug("listening again failed")
		return
	}
	l.log.WithField("address", fmt.Sprintf("%s:%d", l.port.Address, l.port.ServiceID)).Info("listening again")
}

// queuePairGone is called by a queue pair once its CM id is destroyed.
func (l *Listener) queuePairGone() { l.qps.gone() }

// wake makes the event loop look at the table again. The table calls it
// under its lock, so it never runs after the loop freed the eventfd.
func (l *Listener) wake() {
	one := [8]byte{1}
	unix.Write(l.wakefd, one[:])
}

// handleEvent reacts to one CM event and says what to do with its id
// after the ack.
func (l *Listener) handleEvent(ev *C.struct_rdma_cm_event, typ int, id *C.struct_rdma_cm_id, status int) action {
	name := func() string { return eventName(typ) }
	switch typ {
	case C.RDMA_CM_EVENT_CONNECT_REQUEST:
		return l.connectRequest(ev, id)
	case C.RDMA_CM_EVENT_ESTABLISHED:
		if qp := l.lookup(id); qp != nil {
			qp.log.Debug("queue pair established")
		}
	case C.RDMA_CM_EVENT_DISCONNECTED, C.RDMA_CM_EVENT_REJECTED, C.RDMA_CM_EVENT_CONNECT_ERROR,
		C.RDMA_CM_EVENT_UNREACHABLE, C.RDMA_CM_EVENT_TIMEWAIT_EXIT:
		if qp := l.lookup(id); qp != nil {
			if typ != C.RDMA_CM_EVENT_DISCONNECTED && typ != C.RDMA_CM_EVENT_TIMEWAIT_EXIT {
				qp.log.WithField("event", name()).Warn("connection failed")
			}
			qp.Disconnect()
		}
	case C.RDMA_CM_EVENT_DEVICE_REMOVAL, C.RDMA_CM_EVENT_ADDR_CHANGE:
		countDeviceEvent(C.GoString(C.nt_id_device_name(id)), name())
		if id == l.id {
			return dropListenerID
		}
		if typ == C.RDMA_CM_EVENT_DEVICE_REMOVAL {
			markDeviceRemoved(C.nt_id_verbs(id))
		}
		if qp := l.lookup(id); qp != nil {
			qp.log.WithField("event", name()).Warn("the queue pair's RDMA device went away or its address moved; disconnecting (the host reconnects)")
			qp.Disconnect()
		}
	}
	return keepID
}

func (l *Listener) connectRequest(ev *C.struct_rdma_cm_event, id *C.struct_rdma_cm_id) action {
	began := time.Now()
	var creq C.struct_nt_conn_req
	C.nt_conn_req(ev, &creq)
	peer := C.GoString(&creq.peer[0])
	priv := C.GoBytes(unsafe.Pointer(&creq.private_data[0]), C.int(creq.private_data_len))
	log := l.log.WithField("peer", peer)
	if l.qps.isClosing() {
		l.reject(id, nvme.CMRejectNoResources, "port_closing")
		return destroyID
	}
	req, err := nvme.ParseCMRequest(priv, l.maxQueueSize(priv))
	if err != nil {
		var cmErr *nvme.CMRequestError
		errors.As(err, &cmErr)
		log.WithError(err).Warn("connection request refused")
		l.reject(id, cmErr.Reject, rejectReason(cmErr.Reject))
		return destroyID
	}
	// The daemon-wide queue pair limit, before anything is allocated; the
	// queue pair's teardown gives the place back, every refusal below too.
	// The daemon logs a refusal, rate-limited, and counts it by its
	// reason (limits.max_queue_pairs or the peer address's cap):
	// nvmeof_tgt_connects_refused_total.
	place := l.target.ReserveQueue(l.port.ID, peerAddr(peer))
	if place == nil {
		l.reject(id, nvme.CMRejectNoResources, placeRefused)
		return destroyID
	}
	log = log.WithField("qid", req.QID)
	dev, err := acquireDevice(C.nt_id_verbs(id), l.log)
	if err != nil {
		place.Release()
		log.WithError(err).Error("cannot use the RDMA device; refusing the connection")
		l.reject(id, nvme.CMRejectNoResources, rejectReason(nvme.CMRejectNoResources))
		return destroyID
	}
	initiator, refused := readDepth(int(creq.initiator_depth), int(dev.info.max_qp_init_rd_atom))
	if refused != nil {
		log.WithError(refused).WithField("device", dev.name).Warn("connection request refused")
		dev.release()
		place.Release()
		l.reject(id, refused.Reject, rejectReason(refused.Reject))
		return destroyID
	}
	qp, err := newQueuePair(l, id, dev, req, peer, initiator)
	if err != nil {
		dev.release()
		place.Release()
		log.WithError(err).WithField("fix", setUpFix(err, l.port.ID)).
			Error("cannot set up queue pair; refusing this connection, others are unaffected")
		l.reject(id, nvme.CMRejectNoResources, rejectReason(nvme.CMRejectNoResources))
		return destroyID
	}
	qp.place = place
	qp.fq.SetPlace(place)
	// Close either sees this queue pair and disconnects it, or it is
	// refused here.
	if !l.qps.add(id, qp) {
		qp.fq.Close() // stops its connect deadline
		qp.free()
		dev.release()
		place.Release()
		l.reject(id, nvme.CMRejectNoResources, "port_closing")
		return destroyID
	}
	dev.watch(qp)
	acceptConnection(id, qp, req, initiator, log, began)
	return keepID
}

// acceptConnection answers the host's connection request for qp, which the
// listener already holds, and starts it; a failed accept tears qp down.
// began is when the request arrived, for the set-up time it observes.
func acceptConnection(id *C.struct_rdma_cm_id, qp *QueuePair, req nvme.CMRequest, initiator int, log *logrus.Entry, began time.Time) {
	var acc [nvme.CMAcceptSize]byte
	nvme.PutCMAccept(acc[:], uint16(req.RecvDepth()))
	accept := func() error {
		if ret := C.nt_accept(id, unsafe.Pointer(&acc[0]), C.int(len(acc)), C.uint8_t(initiator), 0); ret != 0 {
			return errnoErr("rdma_accept", ret)
		}
		return nil
	}
	if err := acceptThenStart(&qp.mu, accept, qp.Disconnect, qp.start); err != nil {
		log.WithError(err).Warn("accept failed; the queue pair is torn down")
		return
	}
	took := time.Since(began)
	observeSetup(took.Seconds())
	log.WithFields(logrus.Fields{"depth": req.RecvDepth(), "setup": took.String(), "shared_receive_queue": !qp.ownRing}).Debug("queue pair accepted")
}

// readDepth is the initiator depth to accept with: how many RDMA READs
// the queue pair may have in flight. We issue the READs, so it is bounded
// by what the host answers (rdma_cm reports the host's responder
// resources as the request's initiator depth, from our side) and by what
// the device issues. With no READ allowed the host's data never reaches
// us: its first write would stall the send queue behind a READ the device
// may not issue, so the connection is refused instead.
func readDepth(hostResponder, deviceInitiator int) (int, *nvme.CMRequestError) {
	if hostResponder <= 0 {
		return 0, &nvme.CMRequestError{Reject: nvme.CMRejectInvalidIRD,
			Msg: "the host offers no RDMA READ responder resources: it could not send write data"}
	}
	if deviceInitiator <= 0 {
		return 0, &nvme.CMRequestError{Reject: nvme.CMRejectNoResources,
			Msg: "the RDMA device cannot issue RDMA READs (max_qp_init_rd_atom 0): use another device for this port"}
	}
	return min(hostResponder, deviceInitiator), nil
}

// acceptThenStart ends a queue pair's set-up: rdma_accept, then the
// poller. A poller started first could be stopped (the port closing, a
// device event) and tear the queue pair down, rdma_destroy_qp included,
// while rdma_accept still uses it. The accept runs under mu, the lock
// Disconnect takes, so that rdma_disconnect does not run in the middle of
// it either. After a failed accept the queue pair is stopped, and the
// poller started all the same tears it down once, as any other: the
// reservation, the device, the CM id.
func acceptThenStart(mu *sync.Mutex, accept func() error, stop, start func()) error {
	mu.Lock()
	err := accept()
	mu.Unlock()
	if err != nil {
		stop()
	}
	start()
	return err
}

// setUpFix says what to change when a queue pair cannot be set up. Nearly
// always it is locked memory: registered buffers, and on most devices the
// queues themselves, count against RLIMIT_MEMLOCK.
func setUpFix(err error, port uint16) string {
	if errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EAGAIN) {
		return fmt.Sprintf("locked memory ran out: raise the daemon's limit (LimitMEMLOCK=infinity under systemd, ulimit -l unlimited), "+
			"or lower max_queue_size or inline_data_size of port %d, or have hosts use fewer queues (nvme connect --nr-io-queues)", port)
	}
	return "see the error; other connections are served as before"
}

// maxQueueSize is the largest queue the port accepts; the admin queue is
// always allowed the 32 entries the Linux host uses.
func (l *Listener) maxQueueSize(priv []byte) uint16 {
	if len(priv) >= 4 && priv[2] == 0 && priv[3] == 0 {
		return max(l.port.MaxQueueSize, 32)
	}
	return l.port.MaxQueueSize
}

// reject refuses a connection with a CM reject status, counted by reason.
func (l *Listener) reject(id *C.struct_rdma_cm_id, status uint16, reason string) {
	rejects.Refuse(reason, l.port.ID)
	var rej [nvme.CMRejectSize]byte
	nvme.PutCMReject(rej[:], status)
	C.nt_reject(id, unsafe.Pointer(&rej[0]), C.int(len(rej)))
}

func (l *Listener) lookup(id *C.struct_rdma_cm_id) *QueuePair {
	qp, _ := l.qps.lookup(id)
	return qp
}

func (l *Listener) forget(qp *QueuePair) { l.qps.forget(qp.id) }

// QueuePairs counts the connected queue pairs.
func (l *Listener) QueuePairs() int { return l.qps.connected() }

// Close stops accepting at once, so that the address is free for another
// listener when it returns, disconnects every queue pair and waits (up to
// timeout) until they are freed. Queue pairs still busy after timeout
// (a backend that does not answer) are left to finish; the event channel
// they use is freed after the last of them.
func (l *Listener) Close(timeout time.Duration) {
	qps, ok := l.qps.close()
	if !ok {
		return
	}
	for _, qp := range qps {
		qp.Disconnect()
	}
	<-l.unlistened
	select {
	case <-l.done:
	case <-time.After(timeout):
		l.log.WithField("queue_pairs", l.qps.liveCount()).
			Warn("queue pairs still busy after the port closed; they are freed when their commands finish")
	}
}

// peerAddr is the address of a peer given as host:port, or the zero
// address (counted as one peer) if it does not parse.
func peerAddr(peer string) netip.Addr {
	ap, err := netip.ParseAddrPort(peer)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}
