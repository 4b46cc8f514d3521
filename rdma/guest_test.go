package rdma

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/rdmahost"
	"github.com/sirupsen/logrus"
)

// The TestGuest tests need a real RDMA device: they listen on the address
// in NVMEOF_RDMA_TEST_ADDR (an address of an RDMA link, soft-RoCE will
// do) and connect to it with the raw host of test/rdmahost. The e2e
// scenario 78-rdma-guest-tests runs them in the guest and fails unless
// they ran; elsewhere they skip.

// guestPort is the port the tests listen on, apart from the daemon's 4420.
const guestPort = 4430

const (
	guestNQN  = "nqn.2026-11.io.example:rdma-guest"
	guestHost = "nqn.2026-11.io.example:rdma-guest-host"
)

// guestTarget is a target with one nullblk namespace listening on the
// test address.
type guestTarget struct {
	addr string
	tg   *fabrics.Target
	l    *Listener
}

// startGuestTarget listens on NVMEOF_RDMA_TEST_ADDR, or skips the test
// when it is unset. The listener closes when the test ends.
func startGuestTarget(t *testing.T) *guestTarget {
	t.Helper()
	b, err := backend.Open("nullblk", backend.Options{Size: 64 << 20, BlockSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	g := listenGuest(t, guestSetup{portID: 1, serviceID: guestPort, nqn: guestNQN, ns: b})
	return &guestTarget{addr: g.addr, tg: g.tg, l: g.l}
}

// guestSetup is what a guest test's target is made of.
type guestSetup struct {
	portID, serviceID uint16 // the service ID apart from the daemon's 4420 and the other tests'
	nqn               string
	settings          *Settings       // the transport's while the test runs; nil: as they are
	clock             fabrics.Clock   // nil: the wall clock
	ns                backend.Backend // namespace 1; nil: none
}

// guestListener is a target listening on the test address.
type guestListener struct {
	addr string
	port int // the service ID
	nqn  string
	tg   *fabrics.Target
	s    *fabrics.Subsystem
	ns   *fabrics.Namespace // nil without one
	l    *Listener
}

// listenGuest configures the transport, builds setup's target and listens
// on NVMEOF_RDMA_TEST_ADDR, or skips the test when that is unset. The
// listener closes and the settings are restored when the test ends.
func listenGuest(t *testing.T, setup guestSetup) *guestListener {
	t.Helper()
	a := os.Getenv("NVMEOF_RDMA_TEST_ADDR")
	if a == "" {
		t.Skip("needs an RDMA device: set NVMEOF_RDMA_TEST_ADDR to an address of an RDMA link (e2e scenario 78-rdma-guest-tests does, in the guest)")
	}
	addr, err := netip.ParseAddr(a)
	if err != nil {
		t.Fatalf("NVMEOF_RDMA_TEST_ADDR=%q: %v", a, err)
	}
	if setup.settings != nil {
		before := currentSettings()
		if err := Configure(*setup.settings); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { Configure(before) })
	}
	g := &guestListener{addr: a, port: int(setup.serviceID), nqn: setup.nqn, tg: fabrics.NewTarget(nil)}
	if setup.clock != nil {
		g.tg.SetClock(setup.clock)
	}
	p := &fabrics.Port{ID: setup.portID, Address: addr, ServiceID: setup.serviceID, InlineDataSize: 8192, MaxQueueSize: 128}
	if err := g.tg.AddPort(p); err != nil {
		t.Fatal(err)
	}
	g.s = fabrics.NewSubsystem(setup.nqn, "", "", true)
	if setup.ns != nil {
		if g.ns, err = fabrics.NewNamespace(1, setup.ns, false, [16]byte{byte(setup.portID)}); err != nil {
			t.Fatal(err)
		}
		if err := g.s.AddNamespace(g.ns); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.tg.AddSubsystem(g.s); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	if g.l, err = Listen(g.tg, p, logrus.NewEntry(log)); err != nil {
		t.Fatalf("listen on %s:%d: %v", addr, setup.serviceID, err)
	}
	t.Cleanup(func() { g.l.Close(10 * time.Second) })
	return g
}

// controller connects a controller of host to the listener's subsystem
// and returns its I/O queue 1 of depth entries, dialled with o. Both
// queues are abandoned when the test ends.
func (g *guestListener) controller(t *testing.T, host string, depth int, o rdmahost.Options) *rdmahost.Conn {
	t.Helper()
	admin, err := rdmahost.Dial(g.addr, g.port, 0, 31)
	if err != nil {
		t.Fatalf("dial the admin queue: %v", err)
	}
	t.Cleanup(admin.Abandon)
	st, cntlid, err := admin.Connect(host, g.nqn, nvme.ControllerIDDynamic, 0)
	if err != nil || st != 0 {
		t.Fatalf("admin Connect: status %#x, %v", st, err)
	}
	if err := admin.Enable(); err != nil {
		t.Fatal(err)
	}
	io, err := rdmahost.DialOptions(g.addr, g.port, 1, uint16(depth-1), o)
	if err != nil {
		t.Fatalf("dial the I/O queue: %v", err)
	}
	t.Cleanup(io.Abandon)
	if o.Receives == 1 {
		io.StopReceiving() // Connect's response takes the one receive
	}
	if st, _, err := io.Connect(host, g.nqn, cntlid, 0); err != nil || st != 0 {
		t.Fatalf("I/O Connect: status %#x, %v", st, err)
	}
	return io
}

// dial connects queue qid of depth entries to the target.
func (g *guestTarget) dial(t *testing.T, qid uint16, depth int) *rdmahost.Conn {
	t.Helper()
	c, err := rdmahost.Dial(g.addr, guestPort, qid, uint16(depth-1))
	if err != nil {
		t.Fatalf("dial queue %d: %v", qid, err)
	}
	return c
}

// waitQueuePairs polls until the listener has n queue pairs, for up to
// timeout.
func (g *guestTarget) waitQueuePairs(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, func() bool { return g.l.QueuePairs() == n },
		func() string { return fmt.Sprintf("the listener has %d queue pairs, want %d", g.l.QueuePairs(), n) })
}

// poolInUse is the buffer pool bytes held over every device.
func poolInUse() int64 {
	var n int64
	for _, p := range Pools() {
		n += p.InUse
	}
	return n
}

// A controller over real verbs: Connect, Identify and a read on an I/O
// queue, then a clean disconnect. Once the queue pairs are gone, nothing
// registered or taken from the pool is left behind, and closing the
// listener gives back all the device registered.
func TestGuestConnectIdentify(t *testing.T) {
	beforeListen := RegisteredBytes()
	g := startGuestTarget(t)
	registered, inUse := RegisteredBytes(), poolInUse()
	if registered <= beforeListen {
		t.Fatalf("registered memory %d after listening, %d before: the device registered no pool", registered, beforeListen)
	}

	admin := g.dial(t, 0, 32)
	st, cntlid, err := admin.Connect(guestHost, guestNQN, nvme.ControllerIDDynamic, 0)
	if err != nil || st != 0 {
		t.Fatalf("admin Connect: status %#x, %v", st, err)
	}
	if err := admin.Enable(); err != nil {
		t.Fatal(err)
	}
	id, st, err := admin.Identify(nvme.CNSController, 0)
	if err != nil || st != 0 {
		t.Fatalf("Identify Controller: status %#x, %v", st, err)
	}
	if got := string(bytes.TrimRight(id[768:1024], "\x00")); got != guestNQN {
		t.Fatalf("Identify Controller SUBNQN %q, want %q", got, guestNQN)
	}
	if got := uint16(id[78]) | uint16(id[79])<<8; got != cntlid {
		t.Fatalf("Identify Controller CNTLID %d, Connect gave %d", got, cntlid)
	}
	io := g.dial(t, 1, 32)
	if st, _, err := io.Connect(guestHost, guestNQN, cntlid, 0); err != nil || st != 0 {
		t.Fatalf("I/O Connect: status %#x, %v", st, err)
	}
	g.waitQueuePairs(t, 2, 5*time.Second)
	cid, err := io.PostRead(1, 8, 8, 512)
	if err != nil {
		t.Fatal(err)
	}
	r, err := io.WaitResponse(rdmahost.Timeout)
	if err != nil || rdmahost.CID(r) != cid || rdmahost.Status(r) != 0 {
		t.Fatalf("read: response %x, %v", r, err)
	}

	if err := io.Close(); err != nil {
		t.Fatalf("disconnect the I/O queue: %v", err)
	}
	if err := admin.Close(); err != nil {
		t.Fatalf("disconnect the admin queue: %v", err)
	}
	g.waitQueuePairs(t, 0, 10*time.Second)
	if got := RegisteredBytes(); got != registered {
		t.Errorf("registered memory %d after the queue pairs went, %d before they came", got, registered)
	}
	if got := poolInUse(); got != inUse {
		t.Errorf("buffer pool in use %d after the queue pairs went, %d before they came", got, inUse)
	}
	g.l.Close(10 * time.Second)
	if got := RegisteredBytes(); got != beforeListen {
		t.Errorf("registered memory %d after the listener closed, %d before it listened", got, beforeListen)
	}
}
