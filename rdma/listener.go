package rdma

/*
#include <stdlib.h>
#include "verbs.h"
*/
import "C"

import (
	"errors"
	"fmt"
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
type Listener struct {
	target *fabrics.Target
	port   *fabrics.Port
	log    *logrus.Entry

	ch     *C.struct_rdma_event_channel
	id     *C.struct_rdma_cm_id
	stopfd int
	done   chan struct{}

	mu      sync.Mutex
	closing bool // refuse new connections while shutting down
	qps     map[*C.struct_rdma_cm_id]*QueuePair
	pds     map[*C.struct_ibv_context]*C.struct_ibv_pd
}

// ErrNoDevice reports that no RDMA device owns the port's address.
var ErrNoDevice = errors.New("no RDMA device owns this address")

// Listen starts accepting connections for port.
func Listen(t *fabrics.Target, p *fabrics.Port, log *logrus.Entry) (*Listener, error) {
	forkInit.Do(func() {
		// The daemon may fork (os/exec); keep registered pages out of children.
		C.ibv_fork_init()
	})
	l := &Listener{
		target: t, port: p,
		log:  log.WithField("port", p.ID),
		qps:  map[*C.struct_rdma_cm_id]*QueuePair{},
		pds:  map[*C.struct_ibv_context]*C.struct_ibv_pd{},
		done: make(chan struct{}),
	}
	var err error
	l.ch, err = C.rdma_create_event_channel()
	if l.ch == nil {
		return nil, fmt.Errorf("create rdma_cm event channel (is rdma_ucm loaded and /dev/infiniband/rdma_cm present?): %w", err)
	}
	if ret := C.nt_set_nonblock(l.ch.fd); ret != 0 {
		C.rdma_destroy_event_channel(l.ch)
		return nil, errnoErr("event channel non-blocking", ret)
	}
	caddr := C.CString(p.Address.String())
	cport := C.CString(strconv.Itoa(int(p.ServiceID)))
	defer C.free(unsafe.Pointer(caddr))
	defer C.free(unsafe.Pointer(cport))
	if ret := C.nt_listen(l.ch, &l.id, caddr, cport, 128); ret != 0 {
		C.rdma_destroy_event_channel(l.ch)
		addr := fmt.Sprintf("%s port %d", p.Address, p.ServiceID)
		switch syscall.Errno(-ret) {
		case syscall.EADDRNOTAVAIL, syscall.ENODEV:
			return nil, fmt.Errorf("listen on %s: %w: give the address to an RDMA-capable interface, or create a soft-RoCE link on it (rdma link add rxe0 type rxe netdev IFACE)", addr, ErrNoDevice)
		case syscall.EADDRINUSE:
			return nil, fmt.Errorf("listen on %s: port in use: another target (nvmet or a second nvmeof-tgt) already listens there", addr)
		}
		return nil, errnoErr("listen on "+addr, ret)
	}
	if C.nt_id_verbs(l.id) == nil {
		C.rdma_destroy_id(l.id)
		C.rdma_destroy_event_channel(l.ch)
		return nil, fmt.Errorf("listen on %s: %w", p.Address, ErrNoDevice)
	}
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		C.rdma_destroy_id(l.id)
		C.rdma_destroy_event_channel(l.ch)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	l.stopfd = fd
	go l.run()
	l.log.WithField("address", fmt.Sprintf("%s:%d", p.Address, p.ServiceID)).Info("listening")
	return l, nil
}

// run handles rdma_cm events until Close.
func (l *Listener) run() {
	defer close(l.done)
	fds := []unix.PollFd{{Fd: int32(l.ch.fd), Events: unix.POLLIN}, {Fd: int32(l.stopfd), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			l.log.WithError(err).Error("poll on rdma_cm channel failed; no longer accepting connections")
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		for {
			var ev *C.struct_rdma_cm_event
			var typ, status C.int
			var id *C.struct_rdma_cm_id
			if ret := C.nt_get_event(l.ch, &ev, &typ, &id, &status); ret != 0 {
				break // EAGAIN: drained
			}
			destroy := l.handleEvent(ev, int(typ), id, int(status))
			C.rdma_ack_cm_event(ev)
			if destroy {
				C.rdma_destroy_id(id)
			}
		}
	}
}

// handleEvent reacts to one CM event. It returns true when the event's id
// belongs to a refused connection and must be destroyed after the ack.
func (l *Listener) handleEvent(ev *C.struct_rdma_cm_event, typ int, id *C.struct_rdma_cm_id, status int) bool {
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
				qp.log.WithField("event", C.GoString(C.rdma_event_str(C.enum_rdma_cm_event_type(typ)))).Warn("connection failed")
			}
			qp.Disconnect()
		}
	case C.RDMA_CM_EVENT_DEVICE_REMOVAL:
		if id == l.id {
			l.log.Error("RDMA device removed: this port no longer accepts connections; restart the daemon once the device is back")
		} else if qp := l.lookup(id); qp != nil {
			qp.Disconnect()
		}
	case C.RDMA_CM_EVENT_ADDR_CHANGE:
		l.log.Warn("the port's address moved to another device")
	}
	return false
}

func (l *Listener) connectRequest(ev *C.struct_rdma_cm_event, id *C.struct_rdma_cm_id) bool {
	var creq C.struct_nt_conn_req
	C.nt_conn_req(ev, &creq)
	peer := C.GoString(&creq.peer[0])
	priv := C.GoBytes(unsafe.Pointer(&creq.private_data[0]), C.int(creq.private_data_len))
	log := l.log.WithField("peer", peer)
	l.mu.Lock()
	closing := l.closing
	l.mu.Unlock()
	if closing {
		l.reject(id, nvme.CMRejectNoResources)
		return true
	}
	req, err := nvme.ParseCMRequest(priv, l.maxQueueSize(priv))
	if err != nil {
		var cmErr *nvme.CMRequestError
		errors.As(err, &cmErr)
		log.WithError(err).Warn("connection request refused")
		l.reject(id, cmErr.Reject)
		return true
	}
	// The daemon-wide queue pair limit, before anything is allocated; the
	// queue pair's teardown gives the place back.
	if !l.target.ReserveQueue(l.port.ID) {
		l.reject(id, nvme.CMRejectNoResources)
		return true
	}
	qp, err := newQueuePair(l, id, req, peer)
	if err != nil {
		l.target.ReleaseQueue()
		log.WithError(err).Error("cannot set up queue pair; refusing the connection")
		l.reject(id, nvme.CMRejectNoResources)
		return true
	}
	l.mu.Lock()
	l.qps[id] = qp
	l.mu.Unlock()
	qp.start()
	var acc [nvme.CMAcceptSize]byte
	nvme.PutCMAccept(acc[:], uint16(req.RecvDepth()))
	var maxWR, maxCQE, maxRdAtom C.int
	C.nt_device_limits(C.nt_id_verbs(id), &maxWR, &maxCQE, &maxRdAtom)
	// We issue the RDMA READs: our initiator depth is bounded by what the
	// host can answer (rdma_cm reports the host's responder resources as
	// the event's initiator depth, from our point of view) and what our
	// device can issue.
	initiator := min(int(creq.initiator_depth), int(maxRdAtom))
	if ret := C.nt_accept(id, unsafe.Pointer(&acc[0]), C.int(len(acc)), C.uint8_t(initiator), 0); ret != 0 {
		log.WithError(errnoErr("rdma_accept", ret)).Warn("accept failed")
		qp.Disconnect()
		return false
	}
	log.WithFields(logrus.Fields{"qid": req.QID, "depth": req.RecvDepth()}).Debug("queue pair accepted")
	return false
}

// maxQueueSize is the largest queue the port accepts; the admin queue is
// always allowed the 32 entries the Linux host uses.
func (l *Listener) maxQueueSize(priv []byte) uint16 {
	if len(priv) >= 4 && priv[2] == 0 && priv[3] == 0 {
		return max(l.port.MaxQueueSize, 32)
	}
	return l.port.MaxQueueSize
}

func (l *Listener) reject(id *C.struct_rdma_cm_id, status uint16) {
	var rej [nvme.CMRejectSize]byte
	nvme.PutCMReject(rej[:], status)
	C.nt_reject(id, unsafe.Pointer(&rej[0]), C.int(len(rej)))
}

func (l *Listener) lookup(id *C.struct_rdma_cm_id) *QueuePair {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.qps[id]
}

func (l *Listener) forget(qp *QueuePair) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.qps, qp.id)
}

// protectionDomain returns the device's protection domain, allocating it
// on first use. Called on the CM goroutine only.
func (l *Listener) protectionDomain(ctx *C.struct_ibv_context) (*C.struct_ibv_pd, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pd := l.pds[ctx]; pd != nil {
		return pd, nil
	}
	pd, err := C.ibv_alloc_pd(ctx)
	if pd == nil {
		return nil, fmt.Errorf("allocate protection domain: %w", err)
	}
	l.pds[ctx] = pd
	return pd, nil
}

// QueuePairs counts the connected queue pairs.
func (l *Listener) QueuePairs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.qps)
}

// Close stops accepting, disconnects every queue pair and waits (up to
// timeout) until they are freed.
func (l *Listener) Close(timeout time.Duration) {
	l.mu.Lock()
	l.closing = true
	qps := make([]*QueuePair, 0, len(l.qps))
	for _, qp := range l.qps {
		qps = append(qps, qp)
	}
	l.mu.Unlock()
	for _, qp := range qps {
		qp.Disconnect()
	}
	deadline := time.After(timeout)
	for _, qp := range qps {
		select {
		case <-qp.done:
		case <-deadline:
			l.log.Warn("queue pairs still busy at shutdown")
			goto stop
		}
	}
stop:
	one := [8]byte{1}
	unix.Write(l.stopfd, one[:])
	<-l.done
	C.rdma_destroy_id(l.id)
	l.mu.Lock()
	for _, pd := range l.pds {
		if len(l.qps) == 0 {
			C.ibv_dealloc_pd(pd)
		}
	}
	l.mu.Unlock()
	C.rdma_destroy_event_channel(l.ch)
	unix.Close(l.stopfd)
}
