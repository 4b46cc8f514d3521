package rdma

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/rdmahost"
)

// The shared receive queue tests over real verbs (TestGuest*): they listen
// on NVMEOF_RDMA_TEST_ADDR, an address of an RDMA link (soft-RoCE will
// do), and drive the target with the raw host of test/rdmahost. The e2e
// guest runs them; elsewhere they skip.

// srqTestPort is apart from the daemon's 4420 and the other guest tests'.
const srqTestPort = 4431

const (
	srqTestNQN  = "nqn.2026-11.io.example:rdma-srq"
	srqTestHost = "nqn.2026-11.io.example:rdma-srq-host"
)

// srqTarget is a listener on the test address, with a subsystem and no
// namespace: the tests send Keep Alives.
type srqTarget struct {
	addr string
	l    *Listener
	port uint16
}

// startSRQTarget configures the transport with settings and listens. The
// listener closes and the settings are restored when the test ends.
func startSRQTarget(t *testing.T, s Settings) *srqTarget {
	t.Helper()
	t.Cleanup(func() { pollHook.Store(nil) })
	g := listenGuest(t, guestSetup{portID: 7, serviceID: srqTestPort, nqn: srqTestNQN, settings: &s})
	return &srqTarget{addr: g.addr, l: g.l, port: 7}
}

// connect brings up a controller: its admin queue, enabled, and one I/O
// queue of depth entries, whose poller the returned heldPoller can hold.
func (g *srqTarget) connect(t *testing.T, depth int) (admin, io *rdmahost.Conn, hold *heldPoller) {
	t.Helper()
	hold = newHeldPoller()
	h := hold.hook
	pollHook.Store(&h)
	t.Cleanup(hold.let) // a failed test lets the poller go, so its queue pair can be freed
	admin, err := rdmahost.Dial(g.addr, srqTestPort, 0, 31)
	if err != nil {
		t.Fatalf("dial the admin queue: %v", err)
	}
	st, cntlid, err := admin.Connect(srqTestHost, srqTestNQN, nvme.ControllerIDDynamic, 0)
	if err != nil || st != 0 {
		t.Fatalf("admin Connect: status %#x, %v", st, err)
	}
	if err := admin.Enable(); err != nil {
		t.Fatal(err)
	}
	before := uverbsMappings(t)
	if io, err = rdmahost.Dial(g.addr, srqTestPort, 1, uint16(depth-1)); err != nil {
		t.Fatalf("dial the I/O queue: %v", err)
	}
	if st, _, err := io.Connect(srqTestHost, srqTestNQN, cntlid, 0); err != nil || st != 0 {
		t.Fatalf("I/O Connect: status %#x, %v", st, err)
	}
	// For the record: what the I/O queue pairs of host and target
	// mapped from the device (soft-RoCE maps each queue's ring).
	var grew []int64
	for m, size := range uverbsMappings(t) {
		if _, ok := before[m]; !ok {
			grew = append(grew, size)
		}
	}
	t.Logf("uverbs mappings of one I/O queue of depth %d, host and target (bytes): %v", depth, grew)
	return admin, io, hold
}

// heldPoller holds the poller of the I/O queue pair (qid 1) once on: the
// poller stops before it polls its completion queue again, and waits for
// release. Completions then wait in the completion queue.
type heldPoller struct {
	qp          atomic.Pointer[QueuePair]
	on          atomic.Bool
	held        chan struct{} // closed once the poller is held
	heldOnce    sync.Once
	release     chan struct{}
	releaseOnce sync.Once
}

// let releases the poller, if it was held.
func (h *heldPoller) let() { h.releaseOnce.Do(func() { close(h.release) }) }

func newHeldPoller() *heldPoller {
	return &heldPoller{held: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldPoller) hook(qp *QueuePair) {
	if qp.qid != 1 {
		return
	}
	h.qp.Store(qp)
	if !h.on.Load() {
		return
	}
	h.heldOnce.Do(func() { close(h.held) })
	<-h.release
}

// hold stops the I/O queue pair's poller, waking it if it sleeps, and
// returns the queue pair once the poller is held.
func (h *heldPoller) hold(t *testing.T) *QueuePair {
	t.Helper()
	qp := h.qp.Load()
	if qp == nil {
		t.Fatal("no I/O queue pair's poller ran")
	}
	h.on.Store(true)
	qp.kick()
	select {
	case <-h.held:
		return qp
	case <-time.After(rdmahost.Timeout):
		t.Fatalf("the I/O queue pair's poller was not held within %s", rdmahost.Timeout)
		return nil
	}
}

// waitFor checks cond until it holds, failing with what() after timeout.
// The checks are spaced; cond alone decides.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// uverbsMappings is this process's mappings of the RDMA device's files, by
// address range, with their sizes.
func uverbsMappings(t *testing.T) map[string]int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.Contains(f[5], "uverbs") {
			continue
		}
		var lo, hi int64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out[f[0]] = hi - lo
	}
	return out
}

// ioSRQ is the I/O shared receive queue's figures, summed over devices.
func ioSRQ() (entries, posted int64) {
	for _, s := range SharedReceiveQueues() {
		if s.Queue == "io" {
			entries += s.Entries
			posted += s.Posted
		}
	}
	return entries, posted
}

// hangUp closes the host's queues and waits until the target has torn
// down every queue pair.
func (g *srqTarget) hangUp(t *testing.T, admin, io *rdmahost.Conn) {
	t.Helper()
	io.Close()
	admin.Close()
	waitFor(t, 15*time.Second, func() bool { return g.l.QueuePairs() == 0 },
		func() string { return "queue pairs still connected" })
}

// checkSRQFull fails unless every entry of the I/O shared receive queue is
// posted again: with no queue pair left, nothing holds one.
func checkSRQFull(t *testing.T, want int64) {
	t.Helper()
	entries, posted := ioSRQ()
	if entries != want {
		t.Fatalf("I/O shared receive queue of %d entries, want %d", entries, want)
	}
	if posted != entries {
		t.Errorf("%d of %d shared receive queue entries posted after every queue pair went: %d lost", posted, entries, entries-posted)
	}
}

// Receive completions still in the completion queue when a queue pair is
// torn down are polled and their shared receive queue entries reposted:
// the I/O queue's poller is held while the host's commands land, then
// the queue pair is disconnected, so the completions are all still in the
// CQ at teardown, with no request on the wire.
func TestGuestSRQEntriesSurviveTeardown(t *testing.T) {
	g := startSRQTarget(t, Settings{BufferPool: 8 << 20, SharedReceiveQueue: true, ReceiveQueueDepth: 64})
	admin, io, hold := g.connect(t, 32)
	waitFor(t, 5*time.Second, func() bool { e, p := ioSRQ(); return e == 64 && p == e },
		func() string { e, p := ioSRQ(); return fmt.Sprintf("before the test: %d of %d entries posted", p, e) })

	qp := hold.hold(t)
	const sent = 8
	if err := io.Flood(sent); err != nil {
		t.Fatal(err)
	}
	if err := io.WaitSent(rdmahost.Timeout); err != nil {
		t.Fatalf("the target's device did not take the %d commands: %v", sent, err)
	}
	qp.Disconnect()
	hold.let()

	if closed, err := io.WaitClosed(rdmahost.Timeout); !closed || err != nil {
		t.Fatalf("the target did not disconnect the I/O queue: %v", err)
	}
	g.hangUp(t, admin, io)
	checkSRQFull(t, 64)
	g.checkSRQTakes(t, 64)
}

// checkSRQTakes checks on the device that the I/O shared receive queue
// really has n entries posted: a host sends n commands while its queue
// pair's poller is held, and the device must take them all (an entry
// short, the host's sends would wait on receiver-not-ready retries).
// Counting cannot show an entry whose completion was never polled; this
// does.
func (g *srqTarget) checkSRQTakes(t *testing.T, n int) {
	t.Helper()
	admin, io, hold := g.connect(t, 32)
	qp := hold.hold(t)
	for sent := 0; sent < n; sent += 64 {
		if err := io.Flood(min(64, n-sent)); err != nil {
			t.Fatal(err)
		}
		if err := io.WaitSent(rdmahost.Timeout); err != nil {
			t.Fatalf("the device took fewer than %d of %d commands: shared receive queue entries were lost (%v)", sent+64, n, err)
		}
	}
	qp.Disconnect()
	hold.let()
	g.hangUp(t, admin, io)
	checkSRQFull(t, int64(n))
}

// A host that sends past its queue size while its poller is behind fills
// the completion queue with receive completions from the shared receive
// queue: the CQ holds them all (no CQ error, which would lose their
// entries), and once polled the host is dropped and counted.
func TestGuestFloodPastQueueSize(t *testing.T) {
	const depth = 4096
	g := startSRQTarget(t, Settings{BufferPool: 8 << 20, SharedReceiveQueue: true, ReceiveQueueDepth: depth})
	admin, io, hold := g.connect(t, 32)
	overrunsBefore := QueueOverruns()[g.port]
	cqErrors := func() (n uint64) {
		for k, v := range DeviceEvents() {
			if k.Event == "CQ error" {
				n += v
			}
		}
		return n
	}
	cqErrorsBefore := cqErrors()

	hold.hold(t)
	// 320 commands on a queue of 32: ten times its size, more than the
	// 255 a completion queue sized for the queue alone would hold.
	for range 5 {
		if err := io.Flood(64); err != nil {
			t.Fatalf("flood: %v", err)
		}
		if err := io.WaitSent(rdmahost.Timeout); err != nil {
			t.Fatalf("the target's device refused the flood (a completion queue overflow breaks the queue pair): %v", err)
		}
	}
	hold.let()

	if closed, err := io.WaitClosed(rdmahost.Timeout); !closed || err != nil {
		t.Fatalf("the target did not drop the host that overran its queue: %v", err)
	}
	g.hangUp(t, admin, io)
	if got := QueueOverruns()[g.port] - overrunsBefore; got != 1 {
		t.Errorf("%d queue overruns counted on port %d, want 1", got, g.port)
	}
	if got := cqErrors() - cqErrorsBefore; got != 0 {
		t.Errorf("%d completion queue errors", got)
	}
	checkSRQFull(t, depth)
	g.checkSRQTakes(t, depth)
}
