package fabrics

import (
	"errors"
	"net/netip"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// LoopQueue is an in-memory transport for one queue pair: the host is the
// caller, in the same process. It exercises the same Prepare / Execute /
// Complete / Reap path as the RDMA transport, so tests of commands,
// controllers and hostile input need no RDMA. Keyed SGLs address the data
// slice passed to Submit; offset SGLs carry it in-capsule.
type LoopQueue struct {
	Queue *Queue

	// mu plays the poller: Prepare, Execute, Reap and Complete run under it.
	mu      sync.Mutex
	waiters map[*Request]chan struct{}
	reading map[*Request]bool // keyed data held back (SubmitDelayed)
	early   int               // completions of a command still reading its data
	wake    chan struct{}
	gone    chan struct{}
	once    sync.Once

	place     *Place // from Target.ReserveQueue, or nil
	closeOnce sync.Once

	resumes map[*Request]func() // commands waiting on a QoS limit: their data mapping

	// tlsHost and tlsSub, set by SetTLSIdentity before Connect, stand for
	// a secure channel made with that PSK identity (SecureChanneler).
	tlsHost, tlsSub string
}

// SetTLSIdentity makes the queue one whose transport ran a TLS handshake
// with the identity of hostNQN and subNQN; call it before Connect.
func (lq *LoopQueue) SetTLSIdentity(hostNQN, subNQN string) { lq.tlsHost, lq.tlsSub = hostNQN, subNQN }

// TLSIdentity implements SecureChanneler.
func (lq *LoopQueue) TLSIdentity() (hostNQN, subNQN string, ok bool) {
	return lq.tlsHost, lq.tlsSub, lq.tlsHost != ""
}

// NewLoopQueue accepts a queue pair on port with the host's queue ID and
// depth, as the RDMA listener does on a connection request.
func NewLoopQueue(t *Target, p *Port, qid uint16, depth int) *LoopQueue {
	lq := &LoopQueue{
		waiters: map[*Request]chan struct{}{},
		reading: map[*Request]bool{},
		resumes: map[*Request]func(){},
		wake:    make(chan struct{}, 1),
		gone:    make(chan struct{}),
	}
	lq.Queue = NewQueue(t, p, qid, depth, lq)
	go lq.poll()
	return lq
}

// ErrNoResources is returned by DialLoopQueue when the target refuses the
// queue pair, as the RDMA listener rejects the connection request.
var ErrNoResources = errors.New("loop queue refused: queue pair limit reached")

// DialLoopQueue is NewLoopQueue with the daemon-wide queue pair limit
// applied first, as the RDMA listener does: Close gives the reservation back.
func DialLoopQueue(t *Target, p *Port, qid uint16, depth int) (*LoopQueue, error) {
	return DialLoopQueueFrom(t, p, qid, depth, netip.Addr{})
}

// DialLoopQueueFrom is DialLoopQueue for a host at peer address addr.
func DialLoopQueueFrom(t *Target, p *Port, qid uint16, depth int, addr netip.Addr) (*LoopQueue, error) {
	place := t.ReserveQueue(p.ID, addr)
	if place == nil {
		return nil, ErrNoResources
	}
	lq := NewLoopQueue(t, p, qid, depth)
	lq.place = place
	lq.Queue.SetPlace(place)
	return lq, nil
}

func (lq *LoopQueue) poll() {
	for {
		select {
		case <-lq.wake:
			lq.mu.Lock()
			lq.Queue.Reap()
			lq.mu.Unlock()
		case <-lq.gone:
			return
		}
	}
}

// ErrDisconnected is returned by Submit once the target tore the queue down.
var ErrDisconnected = errors.New("loop queue disconnected")

// Complete implements QueueTransport. It runs with lq.mu held.
func (lq *LoopQueue) Complete(r *Request) {
	if lq.reading[r] {
		// Its data is still on the way: an RDMA transport would hand
		// its buffer back while the device writes into it.
		lq.early++
		return
	}
	if ch := lq.waiters[r]; ch != nil {
		delete(lq.waiters, r)
		ch <- struct{}{}
	}
}

// Resume implements Resumer. It runs with lq.mu held.
func (lq *LoopQueue) Resume(r *Request) {
	f := lq.resumes[r]
	delete(lq.resumes, r)
	f()
}

// Waiting is how many of the queue's commands wait on a QoS limit.
func (lq *LoopQueue) Waiting() int {
	lq.mu.Lock()
	defer lq.mu.Unlock()
	return len(lq.resumes)
}

// Wake implements QueueTransport.
func (lq *LoopQueue) Wake() {
	select {
	case lq.wake <- struct{}{}:
	default:
	}
}

// Disconnect implements QueueTransport.
func (lq *LoopQueue) Disconnect() { lq.once.Do(func() { close(lq.gone) }) }

// TRType implements QueueTransport: the loop carries keyed SGLs, as RDMA.
func (lq *LoopQueue) TRType() uint8 { return nvme.TransportRDMA }

// Peer implements QueueTransport.
func (lq *LoopQueue) Peer() string { return "loop" }

// Disconnected reports whether the target tore the queue down.
func (lq *LoopQueue) Disconnected() bool {
	select {
	case <-lq.gone:
		return true
	default:
		return false
	}
}

// Submit sends one command capsule and waits for its response. For
// host-to-controller commands data is the payload; for controller-to-host
// commands the response data is copied into it. cmd must be 64 bytes.
func (lq *LoopQueue) Submit(cmd nvme.Command, data []byte) (nvme.Completion, error) {
	if cmd.SGL().ID() == nvme.SGLDataBlockOffset {
		return lq.submit(cmd, data, nil)
	}
	return lq.submit(cmd, nil, data)
}

// SubmitSGL sends a command whose capsule carries inline bytes (in-capsule
// data or a descriptor list) and whose keyed descriptors address host at
// their Addr as an offset.
func (lq *LoopQueue) SubmitSGL(cmd nvme.Command, inline, host []byte) (nvme.Completion, error) {
	return lq.submit(cmd, inline, host)
}

// SubmitAsync is Submit for commands the target may hold (Async Event
// Request) or that a test wants in flight together: the command reaches
// the target before SubmitAsync returns, so commands submitted one after
// the other arrive in that order; the channel yields the response (none if
// the queue went away).
func (lq *LoopQueue) SubmitAsync(cmd nvme.Command, data []byte) <-chan nvme.Completion {
	out := make(chan nvme.Completion, 1)
	wait := lq.start(cmd, nil, data)
	go func() {
		if c, err := wait(); err == nil {
			out <- c
		}
		close(out)
	}()
	return out
}

// SubmitDelayed is SubmitAsync for a command whose keyed host-to-controller
// data is held back, as an RDMA READ still in flight: the command arrives
// and is prepared at once, but its data lands, and it executes, only when
// deliver is called. Other commands may arrive and run in between.
func (lq *LoopQueue) SubmitDelayed(cmd nvme.Command, data []byte) (deliver func(), rsp <-chan nvme.Completion) {
	out := make(chan nvme.Completion, 1)
	var held func()
	wait := lq.startWith(cmd, nil, data, &held)
	go func() {
		if c, err := wait(); err == nil {
			out <- c
		}
		close(out)
	}()
	deliver = func() {
		if held != nil {
			lq.mu.Lock()
			held()
			lq.mu.Unlock()
		}
	}
	return deliver, out
}

// EarlyCompletions counts commands completed while their data was still
// on its way (SubmitDelayed): 0 unless fabrics has a bug.
func (lq *LoopQueue) EarlyCompletions() int {
	lq.mu.Lock()
	defer lq.mu.Unlock()
	return lq.early
}

func (lq *LoopQueue) submit(cmd nvme.Command, inline, host []byte) (nvme.Completion, error) {
	return lq.start(cmd, inline, host)()
}

// start hands the command to the target and returns a function that
// waits for its completion.
func (lq *LoopQueue) start(cmd nvme.Command, inline, host []byte) func() (nvme.Completion, error) {
	return lq.startWith(cmd, inline, host, nil)
}

// startWith is start; with held non-nil, keyed host-to-controller data is
// not transferred: *held is set to what transfers it and executes.
func (lq *LoopQueue) startWith(cmd nvme.Command, inline, host []byte, held *func()) func() (nvme.Completion, error) {
	if lq.Disconnected() {
		return func() (nvme.Completion, error) { return nil, ErrDisconnected }
	}
	r := &Request{
		Cmd: append(nvme.Command(nil), cmd[:nvme.CommandSize]...),
		Rsp: make(nvme.Completion, nvme.CompletionSize),
	}
	done := make(chan struct{}, 1)
	var descs [MaxKeyedDescriptors]Keyed
	n := 0
	lq.mu.Lock()
	lq.waiters[r] = done
	if lq.Queue.Prepare(r) {
		n = lq.mapData(r, inline, host, &descs, held)
	} else if lq.waiters[r] != nil {
		// Not completed: it waits on its namespace's QoS limit.
		lq.resumes[r] = func() { n = lq.mapData(r, inline, host, &descs, held) }
	}
	lq.mu.Unlock()
	return func() (nvme.Completion, error) {
		select {
		case <-done:
		case <-lq.gone:
			return nil, ErrDisconnected
		}
		if r.Dir == DirCtrlToHost && r.status == 0 {
			scatter(r.Data, host, descs[:n])
		}
		return r.Rsp, nil
	}
}

func (lq *LoopQueue) mapData(r *Request, inline, host []byte, descs *[MaxKeyedDescriptors]Keyed, held *func()) int {
	if r.Len == 0 {
		if id := r.Cmd.SGL().ID(); id != nvme.SGLDataBlockOffset && id != nvme.SGLKeyed && id != nvme.SGLKeyedInvalidate {
			lq.Queue.Fail(r, nvme.StatusSGLInvalidType|nvme.DNR)
			return 0
		}
		lq.Queue.Execute(r)
		return 0
	}
	if r.Cmd.SGL().ID() == nvme.SGLDataBlockOffset {
		if st := r.MapInline(inline); st != 0 {
			lq.Queue.Fail(r, st)
			return 0
		}
		lq.Queue.Execute(r)
		return 0
	}
	n, st := r.KeyedDescriptors(inline, descs)
	if st != 0 {
		lq.Queue.Fail(r, st)
		return 0
	}
	r.Data = make([]byte, r.Len)
	if r.Dir == DirHostToCtrl && held != nil {
		lq.reading[r] = true
		*held = func() {
			delete(lq.reading, r)
			gather(r.Data, host, descs[:n])
			lq.Queue.Execute(r)
		}
		return n
	}
	if r.Dir == DirHostToCtrl {
		gather(r.Data, host, descs[:n])
	}
	lq.Queue.Execute(r)
	return n
}

// gather fills data from the host buffers the descriptors address, in
// order, as RDMA READs would.
func gather(data, host []byte, descs []Keyed) {
	pos := 0
	for _, d := range descs {
		if pos >= len(data) {
			return
		}
		if d.Addr < uint64(len(host)) {
			pos += copy(data[pos:min(pos+int(d.Len), len(data))], host[d.Addr:])
		}
	}
}

// scatter copies data out to the host buffers, as RDMA WRITEs would.
func scatter(data, host []byte, descs []Keyed) {
	pos := 0
	for _, d := range descs {
		if pos >= len(data) {
			return
		}
		n := min(int(d.Len), len(data)-pos)
		if d.Addr < uint64(len(host)) {
			copy(host[d.Addr:min(d.Addr+uint64(n), uint64(len(host)))], data[pos:pos+n])
		}
		pos += n
	}
}

// Close tears the queue down as the transport would.
// It may be called more than once, as a host may disconnect twice.
func (lq *LoopQueue) Close() {
	lq.closeOnce.Do(func() {
		lq.Disconnect()
		// Closing drains the queue's ring, which the poller owns.
		lq.mu.Lock()
		lq.Queue.Close()
		lq.mu.Unlock()
		lq.place.Release()
	})
}
