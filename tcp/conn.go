package tcp

import (
	"errors"
	"io"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Sizes of the transport.
const (
	// AdminInline is the in-capsule data an admin command may carry: the
	// Linux host sends admin data up to 8 KiB in the capsule
	// (NVME_TCP_ADMIN_CCSZ), Connect and authentication data included.
	AdminInline = 8192
	// MaxH2CData is the largest H2CData PDU a host may send (ICResp
	// MAXH2CDATA): the host splits the data of one R2T into PDUs this size.
	MaxH2CData = 128 << 10
	// adminDepth is the admin queue's requests, as the RDMA transport's.
	adminDepth = 32
	// stageSize is the receive buffer small PDUs are read through;
	// data of directRead bytes or more goes straight to its buffer.
	stageSize  = 64 << 10
	directRead = 4096
	// readsPerPass bounds the socket reads of one poller pass, so that
	// completions are sent while a host keeps the socket full.
	readsPerPass = 16
	// maxIOV is the most segments one writev sends (IOV_MAX).
	maxIOV = 1024
)

// connectTimeout is how long a connection may take to send its ICReq and
// first command capsule; from there fabrics' connect deadline and keep
// alive bound it. A variable for tests.
var connectTimeout = fabrics.ConnectTimeout

// server is what the connections of one port share.
type server struct {
	target *fabrics.Target
	port   *fabrics.Port
	pool   *Pool
	log    *logrus.Entry
	stats  *PortStats
	gone   func(*Conn) // the listener forgets a connection
	warns  warnLimiter
}

// Conn is one NVMe/TCP connection: one queue pair. A single poller
// goroutine, locked to its OS thread, reads and parses PDUs, runs the
// commands through fabrics and sends the PDUs they produce in one writev
// per pass; it sleeps in poll(2) on the socket and an eventfd.
type Conn struct {
	srv  *server
	fd   int
	efd  int // eventfd: Wake, the pool, Disconnect and the queue's io_uring write it
	peer string
	log  *logrus.Entry

	// efdUse counts the writers of efd in flight, plus efdClosed once
	// teardown closes it: a writer that passed its checks just before
	// the teardown would otherwise write into the descriptor's next
	// owner, another host's socket perhaps.
	efdUse atomic.Int64

	fq       *fabrics.Queue // nil until the first command capsule names the queue
	stopping atomic.Bool
	sleeping atomic.Bool
	started  atomic.Bool // fq exists: the pre-connect deadline is over
	timer    *time.Timer
	done     chan struct{}
	place    *fabrics.Place // from Target.ReserveQueue; nil in tests that serve a socket pair

	// Negotiated by ICReq.
	initialized bool
	lim         Limits
	hpdaAlign   int // C2HData's data starts at a multiple of this

	reqs     []request
	free     []int32
	bufWait  []int32     // requests waiting for a pool buffer, in arrival order
	acct     account     // the pool's buffers lent to this connection
	rxWait   uint32      // the receiver waits for a pool buffer of this many bytes of in-capsule data
	st       stalls      // the data deadline (stall.go)
	sq       sqCount     // the host's submission queue, to find overruns
	granted  atomic.Bool // a buffer came back, or a recheck was asked: look at the waiters again
	recheck  atomic.Bool // a fence asks the waiting commands to be admitted again (Recheck)
	maxInl   uint32      // in-capsule data of this queue's commands
	closing  bool        // a fatal error: send what is queued, then close
	eof      bool
	pollFDs  [2]unix.PollFd
	wantOut  bool
	rx       receiver
	tx       sender
	icresp   [ICRespSize]byte
	term     [TermReqHdrSize + MaxTermReqData]byte
	zeros    [128]byte // C2HData padding for the host's alignment
	eventBuf [8]byte

	// System calls of the poller, logged when the connection closes.
	reads, writevs, polls uint64
	// spin keeps the poller reading, without sleeping, for a moment
	// after its work while the host streams commands: a sleep in poll(2)
	// and the wake-up cost more than the reads (fabrics.Spin).
	spin fabrics.Spin
	// idle is where the poller sleeps once its queue is idle.
	idle fabrics.IdleParker

	// The secure channel (secure.go): made with the PSK identity of
	// tlsHost for tlsSub, which Connect must name.
	tls             bool
	tlsHost, tlsSub string
}

func newConn(srv *server, fd int, peer string) (*Conn, error) {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	c := &Conn{
		srv: srv, fd: fd, efd: efd, peer: peer,
		log:  srv.log.WithField("peer", peer),
		done: make(chan struct{}),
		spin: fabrics.Spin{Window: spinWindow},
	}
	c.lim = Limits{MaxInline: max(AdminInline, srv.port.InlineDataSize), MaxH2CData: MaxH2CData}
	c.rx.stage = make([]byte, stageSize)
	c.rx.reset()
	return c, nil
}

// start runs the poller and arms the deadline for the first command.
func (c *Conn) start() {
	c.timer = time.AfterFunc(connectTimeout, c.connectExpired)
	go c.poll()
}

func (c *Conn) connectExpired() {
	if c.started.Load() || c.stopping.Load() {
		return
	}
	c.srv.stats.ConnectTimeouts.Add(1)
	c.srv.warn(warnConnectTimeout, c.log.WithField("connect_timeout", connectTimeout.String()),
		"no ICReq and command capsule on the connection in time; closing it (a peer that does not speak NVMe/TCP, or one that stalled)")
	c.Disconnect()
}

// spinWindow is how long an idle poller spins while its host streams
// (fabrics.Spin). A host's next command at queue depth 1 comes a round
// trip through its nvme-tcp and the application after our response:
// 1 ms catches it where 200 us (the RDMA poller's) did not. Measured in
// the guest (docs/performance.md): QD1 mean completion 537 us without
// spinning, 424 us with 200 us, 275 us with 1 ms.
var spinWindow = fabrics.SpinWindow(time.Millisecond)

// poll is the connection's poller goroutine. It returns with its thread
// still locked, so that the thread exits with it: Go keeps an unlocked
// thread for reuse, and the threads of a thousand connections gone would
// stay.
func (c *Conn) poll() {
	runtime.LockOSThread()
	if c.srv.port.TLS != fabrics.TLSNone && !c.secure() {
		c.stopping.Store(true)
	}
	for !c.stopping.Load() {
		if c.pass() {
			c.spin.Worked()
		} else if c.spin.Idle() {
			c.sleep()
		}
		if c.watching() {
			c.checkStalls()
		}
	}
	c.teardown()
}

// pass does one round of receiving, completing and sending. It reports
// whether it did anything.
func (c *Conn) pass() bool {
	did := false
	if !c.closing && !c.eof {
		n, err := c.receive()
		did = n > 0
		if err != nil {
			c.receiveFailed(err)
		}
	}
	if c.granted.Swap(false) {
		if c.recheck.Load() && c.recheck.Swap(false) {
			c.readmitWaiters()
		}
		if c.rxWait > 0 {
			if err := c.resumeCapsule(); err != nil {
				c.receiveFailed(err)
			}
		}
		c.retryBuffers()
		did = true
	}
	if c.fq != nil && c.fq.Pending() {
		c.fq.Reap()
		did = true
	}
	if err := c.flush(); err != nil {
		if !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
			c.log.WithError(err).Warn("sending to the host failed; closing the connection")
		}
		c.Disconnect()
		return true
	}
	if (c.closing || c.eof) && !c.tx.pending() {
		c.Disconnect()
		return true
	}
	return did
}

// receiveFailed handles the end of the host's stream or a fatal error in it.
func (c *Conn) receiveFailed(err error) {
	var pe *PDUError
	switch {
	case errors.As(err, &pe):
		c.fatal(pe)
	case errors.Is(err, errTLS):
		c.log.Warn("the host asked for TLS (nvme connect --tls); this port does not support TLS: closing the connection, connect without --tls")
		c.closing = true
	case c.tls && errors.Is(err, unix.EIO):
		if err := c.tlsRecordEnd(); errors.Is(err, io.EOF) {
			c.log.Debug("the host closed the TLS channel")
		} else {
			c.srv.stats.TLSRecordErrors.Add(1)
			c.log.WithError(err).Warn("the host's TLS channel ended; closing the connection")
		}
		c.eof = true
	case errors.Is(err, errEOF), errors.Is(err, unix.ECONNRESET):
		c.log.Debug("the host closed the connection")
		c.eof = true
	case errors.Is(err, errPeerTerm):
		c.eof = true
	default:
		c.log.WithError(err).Warn("receiving from the host failed; closing the connection")
		c.eof = true
	}
}

// fatal answers a fatal transport error with a C2HTermReq and closes the
// connection once it is sent. The offending PDU header goes with it.
func (c *Conn) fatal(pe *PDUError) {
	c.srv.stats.TermReqs.Add(1)
	c.srv.warn(warnFatal, c.log.WithFields(logrus.Fields{"fes": pe.FES, "fei": pe.FEI}),
		"fatal NVMe/TCP error from the host: "+pe.Msg+"; sending C2HTermReq and closing the connection")
	data := c.rx.hdr[:min(c.rx.hdrLen(), MaxTermReqData)]
	PutTermReq(c.term[:], TypeC2HTermReq, pe.FES, pe.FEI, len(data))
	n := copy(c.term[TermReqHdrSize:], data)
	c.tx.queue(c.term[:TermReqHdrSize+n], nil)
	c.closing = true
}

// sleep waits in poll(2) for the socket or the eventfd. The sleeping flag
// is set first, so that a Wake after the last check writes the eventfd.
func (c *Conn) sleep() {
	c.sleeping.Store(true)
	if c.stopping.Load() || c.granted.Load() || c.fq != nil && c.fq.Pending() {
		c.sleeping.Store(false)
		return
	}
	var ev int16
	if !c.closing && !c.eof && c.rxWait == 0 {
		ev = unix.POLLIN
	}
	if c.wantOut {
		ev |= unix.POLLOUT
	}
	c.pollFDs = [2]unix.PollFd{{Fd: int32(c.fd), Events: ev}, {Fd: int32(c.efd), Events: unix.POLLIN}}
	c.polls++
	slept := time.Now()
	timeout := c.pollTimeout()
	if ev == unix.POLLIN && timeout < 0 && c.spin.Parks() && c.idle.Park(c.log, false, c.fd, c.efd) {
		timeout = 0 // what woke it, without waiting
	}
	var err error
	if timeout == 0 {
		err = rawPollNow(c.pollFDs[:])
	} else {
		_, err = unix.Poll(c.pollFDs[:], timeout)
	}
	c.spin.Slept(time.Since(slept))
	c.sleeping.Store(false)
	if err != nil && err != unix.EINTR {
		c.log.WithError(err).Error("poll on the connection failed; closing it")
		c.Disconnect()
		return
	}
	// Readable, closed or failed: the next read says which. Writable alone
	// says nothing of the receive side.
	c.rx.drained = err == nil && c.pollFDs[0].Revents&^unix.POLLOUT == 0
	if c.pollFDs[1].Revents != 0 {
		rawRead(c.efd, c.eventBuf[:])
	}
}

// Wake implements fabrics.QueueTransport.
func (c *Conn) Wake() {
	if c.sleeping.Load() {
		c.kick()
	}
}

func (c *Conn) kick() {
	if c.efdUse.Add(1) < efdClosed {
		unix.Write(c.efd, eventfdOne[:])
	}
	c.efdUse.Add(-1)
}

// eventfdOne is what a write adds to an eventfd's counter. A variable of
// the package, so that no write copies it to the heap.
var eventfdOne = [8]byte{1}

const efdClosed = 1 << 32

// closeEventFD closes the eventfd once no writer is in kick: the closed
// mark, set once, turns later writers away, and those already past their
// check are waited for.
func (c *Conn) closeEventFD() {
	c.efdUse.Add(efdClosed)
	for c.efdUse.Load() != efdClosed {
		runtime.Gosched() // a writer is within its write(2)
	}
	unix.Close(c.efd)
}

// poolWake is the pool's call when a buffer came back.
func (c *Conn) poolWake() {
	c.granted.Store(true)
	c.Wake()
}

// Recheck implements fabrics.Rechecker: the poller checks the commands
// waiting for a pool buffer again (readmitWaiters). It goes through the
// granted flag, which the poller already reads each pass and before it
// sleeps, so that the pass of a connection nobody fences pays nothing
// more. A Recheck after teardown writes nothing (kick).
func (c *Conn) Recheck() {
	c.recheck.Store(true)
	c.poolWake()
}

// EventFD implements fabrics.EventFDer: the queue's io_uring signals its
// completions on the eventfd the poller sleeps on.
func (c *Conn) EventFD() int { return c.efd }

// Peer implements fabrics.QueueTransport.
func (c *Conn) Peer() string { return c.peer }

// TRType implements fabrics.QueueTransport.
func (c *Conn) TRType() uint8 { return nvme.TransportTCP }

// Disconnect implements fabrics.QueueTransport: it stops the poller, which
// tears the connection down. Any goroutine may call it.
func (c *Conn) Disconnect() {
	if c.stopping.Swap(true) {
		return
	}
	c.kick()
}

// Done is closed once the connection is torn down.
func (c *Conn) Done() <-chan struct{} { return c.done }

// teardown runs on the poller once it stops, in reverse order of set-up:
// fabrics lets go of the queue (waiting for the commands still with the
// backend), then the requests give their buffers back, then the socket and
// eventfd close, and last the connection's place in the queue pair limit.
func (c *Conn) teardown() {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.closeSend()
	if c.fq != nil {
		c.fq.Close()
	}
	c.srv.pool.forget(c)
	for i := range c.reqs {
		c.dropBuffer(&c.reqs[i])
	}
	if c.fq != nil {
		c.srv.pool.waitingFor(&c.acct, 0)
		if c.fq.QID != 0 {
			c.srv.pool.leave()
		}
	}
	c.idle.Close()
	unix.Close(c.fd)
	c.closeEventFD()
	c.place.Release()
	c.srv.stats.Connections.Add(-1)
	if c.srv.gone != nil {
		c.srv.gone(c)
	}
	c.log.WithFields(logrus.Fields{"reads": c.reads, "writevs": c.writevs, "polls": c.polls, "parks": c.idle.Parks}).Debug("connection closed")
	close(c.done)
}

// closeSend ends the stream to the host with a FIN and discards what the
// host sent that was not read: closing a socket with unread data resets
// the connection, and the host could lose the C2HTermReq before it.
func (c *Conn) closeSend() {
	unix.Shutdown(c.fd, unix.SHUT_WR)
	for range 64 {
		if n, err := unix.Read(c.fd, c.rx.stage); n <= 0 || err != nil {
			return
		}
	}
}

// openQueue creates the fabrics queue on the first command capsule: on
// TCP the queue ID and size come with Connect, not with the connection.
func (c *Conn) openQueue(cmd nvme.Command) {
	qid, depth := uint16(0), adminDepth
	if cmd.Opcode() == nvme.OpFabrics && cmd.FabricsType() == nvme.FabricsConnect {
		qid = cmd.ConnectQID()
	}
	if qid != 0 {
		depth = int(c.srv.port.MaxQueueSize)
		c.maxInl = c.srv.port.InlineDataSize
	} else {
		c.maxInl = AdminInline
	}
	c.started.Store(true)
	c.timer.Stop()
	c.reqs = make([]request, depth)
	c.free = make([]int32, 0, depth)
	for i := depth - 1; i >= 0; i-- {
		r := &c.reqs[i]
		r.Tag = i
		r.Cmd = r.cmd[:]
		r.Rsp = r.rsp[CommonHeaderSize : CommonHeaderSize+nvme.CompletionSize]
		c.free = append(c.free, int32(i))
	}
	c.bufWait = make([]int32, 0, depth)
	c.tx.init(depth)
	c.log = c.log.WithField("qid", qid)
	if qid != 0 {
		// Admin queues take buffers out of the reserve, small ones: a
		// share each would halve every I/O queue's.
		c.srv.pool.join()
	}
	c.fq = fabrics.NewQueue(c.srv.target, c.srv.port, qid, depth, c)
	c.fq.SetPlace(c.place)
}
