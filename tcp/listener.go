package tcp

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// PortStats are the counters of one TCP port.
type PortStats struct {
	Connections      atomic.Int64  // open now
	Accepted         atomic.Uint64 // connections accepted
	Refused          atomic.Uint64 // refused at the queue pair limit
	ConnectTimeouts  atomic.Uint64 // closed without a command capsule in time
	TermReqs         atomic.Uint64 // C2HTermReq sent: fatal errors of the host's PDUs
	DataDigestErrors atomic.Uint64 // commands failed on a data digest error
	Overruns         atomic.Uint64 // more commands than the queue size
	DataTimeouts     atomic.Uint64 // closed: no R2T data, or no response read, within the data timeout
	TLSHandshakes    atomic.Uint64 // TLS secure channels made
	TLSFailures      atomic.Uint64 // closed: the TLS handshake failed
	TLSRefused       atomic.Uint64 // closed: a connection in clear to a port that requires TLS
	TLSRecordErrors  atomic.Uint64 // closed: a TLS record other than data or close_notify (an alert, a KeyUpdate, a damaged record)
}

var (
	statsMu sync.Mutex
	stats   = map[uint16]*PortStats{}
)

// Stats returns the counters of every port that ever listened, by port ID.
// A port listening again keeps counting where it left off.
func Stats() map[uint16]*PortStats {
	statsMu.Lock()
	defer statsMu.Unlock()
	out := make(map[uint16]*PortStats, len(stats))
	for id, s := range stats {
		out[id] = s
	}
	return out
}

func portStats(id uint16) *PortStats {
	statsMu.Lock()
	defer statsMu.Unlock()
	s := stats[id]
	if s == nil {
		s = &PortStats{}
		stats[id] = s
	}
	return s
}

var (
	poolOnce   sync.Once
	sharedPool *Pool
)

// SetPoolBytes sets the size of the buffer pool every TCP port shares
// (tcp.buffer_pool).
func SetPoolBytes(n int64) { SharedPool().SetLimit(n) }

// SharedPool is the buffer pool of the daemon's TCP ports.
func SharedPool() *Pool {
	poolOnce.Do(func() { sharedPool = NewPool(DefaultPoolBytes) })
	return sharedPool
}

// Listener accepts NVMe/TCP connections on one port.
type Listener struct {
	srv server
	ln  *net.TCPListener

	mu      sync.Mutex
	conns   map[*Conn]struct{}
	closing bool
	empty   chan struct{} // closed once closing and the last connection is gone
	done    chan struct{} // the accept loop returned
}

// Listen starts accepting connections for port p.
func Listen(t *fabrics.Target, p *fabrics.Port, log *logrus.Entry) (*Listener, error) {
	return listenOn(t, p, netip.AddrPortFrom(p.Address, p.ServiceID), log)
}

// listenOn listens for port p on addr; tests listen on any free port.
func listenOn(t *fabrics.Target, p *fabrics.Port, addr netip.AddrPort, log *logrus.Entry) (*Listener, error) {
	if p.TLS != fabrics.TLSNone && !TLSAvailable() {
		return nil, fmt.Errorf("port %d asks for TLS, which this build cannot serve (built without GnuTLS): leave tls out of the port, or set it to none", p.ID)
	}
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
	if err != nil {
		return nil, fmt.Errorf("listen on %s (another process on the port? a port's address must be one of this machine's): %w", addr, err)
	}
	l := &Listener{
		ln: ln, conns: map[*Conn]struct{}{},
		empty: make(chan struct{}), done: make(chan struct{}),
	}
	l.srv = server{target: t, port: p, pool: SharedPool(), stats: portStats(p.ID),
		log: log.WithField("port", p.ID), gone: l.forget}
	go l.run()
	l.srv.log.WithFields(logrus.Fields{"address": l.Addr().String(), "transport": "tcp"}).Info("listening")
	return l, nil
}

// Addr is the address the listener accepts on (its port, when 0 was asked).
func (l *Listener) Addr() netip.AddrPort { return l.ln.Addr().(*net.TCPAddr).AddrPort() }

func (l *Listener) run() {
	defer close(l.done)
	for {
		nc, err := l.ln.AcceptTCP()
		if err != nil {
			if l.isClosing() {
				return
			}
			l.srv.log.WithError(err).Warn("accept failed")
			time.Sleep(10 * time.Millisecond) // out of descriptors: do not spin
			continue
		}
		l.accept(nc)
	}
}

// accept takes the connection's socket out of the Go runtime: the
// connection's poller reads and writes it with its own system calls.
func (l *Listener) accept(nc *net.TCPConn) {
	peer := nc.RemoteAddr().String()
	log := l.srv.log.WithField("peer", peer)
	nc.SetNoDelay(true)
	fd, err := dupSocket(nc)
	nc.Close()
	if err != nil {
		log.WithError(err).Warn("cannot take the connection's socket; closing it")
		return
	}
	// The daemon logs the refusal, rate-limited.
	place := l.srv.target.ReserveQueue(l.srv.port.ID, nc.RemoteAddr().(*net.TCPAddr).AddrPort().Addr())
	if place == nil {
		l.srv.stats.Refused.Add(1)
		unix.Close(fd)
		return
	}
	if err := l.serve(fd, peer, place); err != nil {
		place.Release()
		log.WithError(err).Warn("cannot set up the connection; closing it")
		unix.Close(fd)
	}
}

// serve runs the connection on socket fd, which it then owns, holding
// place, which its teardown gives back. Tests serve one end of a socket
// pair.
func (l *Listener) serve(fd int, peer string, place *fabrics.Place) error {
	if err := unix.SetNonblock(fd, true); err != nil {
		return err
	}
	c, err := newConn(&l.srv, fd, peer)
	if err != nil {
		return err
	}
	c.place = place
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		unix.Close(c.efd)
		return fmt.Errorf("port closing")
	}
	l.conns[c] = struct{}{}
	l.mu.Unlock()
	l.srv.stats.Accepted.Add(1)
	l.srv.stats.Connections.Add(1)
	c.start()
	return nil
}

func dupSocket(nc *net.TCPConn) (int, error) {
	rc, err := nc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) {
		fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	return fd, derr
}

func (l *Listener) isClosing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closing
}

func (l *Listener) forget(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c)
	if l.closing && len(l.conns) == 0 {
		close(l.empty)
	}
}

// QueuePairs counts the open connections.
func (l *Listener) QueuePairs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Close stops accepting, so that the address is free when it returns,
// disconnects every connection and waits up to timeout for them to go.
func (l *Listener) Close(timeout time.Duration) {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return
	}
	l.closing = true
	conns := make([]*Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	if len(l.conns) == 0 {
		close(l.empty)
	}
	l.mu.Unlock()
	l.ln.Close()
	<-l.done
	for _, c := range conns {
		c.Disconnect()
	}
	select {
	case <-l.empty:
	case <-time.After(timeout):
		l.srv.log.WithField("connections", l.QueuePairs()).
			Warn("connections still busy after the port closed; they are freed when their commands finish")
	}
}
