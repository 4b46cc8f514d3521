package rdma

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/rdmahost"
)

// qosTestPort is apart from the daemon's 4420 and the other guest tests'.
const qosTestPort = 4432

const (
	qosTestNQN    = "nqn.2026-11.io.example:rdma-qos"
	qosTestHostA  = "nqn.2026-11.io.example:rdma-qos-throttled"
	qosTestHostB  = "nqn.2026-11.io.example:rdma-qos-other"
	qosTestSRQ    = 64 // the smallest I/O shared receive queue Configure allows
	qosTestBlock  = 512
	qosTestWrites = qosTestSRQ + 36
)

// A host whose writes wait on a low write IOPS limit must not hold the
// shared receive queue every host on the device receives from: a waiting
// write with in-capsule data gives its receive buffer back, so another
// host's read is served while the whole backlog waits, and the backlog's
// data, copied out of the receive buffers the device then fills again, is
// what lands on the namespace once the limit lifts.
//
// The target's clock is manual: no QoS timer lets a waiter go (nor ends
// one at the wait's bound) until the test lifts the limit, so that a
// shared receive queue held by waiters stays held.
func TestGuestQoSWaitersLeaveTheSharedReceiveQueue(t *testing.T) {
	b, err := backend.Open("file", backend.Options{Path: filepath.Join(t.TempDir(), "ns1"), Size: 16 << 20, BlockSize: qosTestBlock, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	g := listenGuest(t, guestSetup{portID: 8, serviceID: qosTestPort, nqn: qosTestNQN, ns: b, clock: &fabrics.ManualClock{},
		settings: &Settings{BufferPool: DefaultBufferPool, SharedReceiveQueue: true, ReceiveQueueDepth: qosTestSRQ}})
	a, s, ns := g.addr, g.s, g.ns
	if err := s.SetQoS(1, fabrics.QoSLimits{WriteIOPS: 1}); err != nil {
		t.Fatal(err)
	}

	throttled := dialController(t, a, qosTestHostA, 128)
	other := dialController(t, a, qosTestHostB, 32)

	// More writes than the shared receive queue has entries, each with
	// its block in the capsule.
	pattern := func(i int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, qosTestBlock) }
	for i := range qosTestWrites {
		cmd := rdmahost.WriteInlineCommand(throttled.NextCID(), 1, uint64(i), 1, qosTestBlock)
		if err := throttled.SendCapsule(cmd, pattern(i)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for ns.QoSStats().Waiting < qosTestSRQ && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // spaces the checks; the count decides
	}
	if w := ns.QoSStats().Waiting; w < qosTestSRQ {
		t.Fatalf("%d of %d writes wait on the limit, want at least the shared receive queue's %d", w, qosTestWrites, qosTestSRQ)
	}

	// Reads draw from no write limit: the other host's is served at once,
	// if only it finds a receive buffer.
	cid, err := other.PostRead(1, 0, 1, qosTestBlock)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := other.WaitResponse(rdmahost.Timeout); err != nil || rdmahost.CID(r) != cid || rdmahost.Status(r) != 0 {
		t.Fatalf("another host's read while %d writes wait on the limit: response %x, %v (the waiters hold the shared receive queue)",
			ns.QoSStats().Waiting, r, err)
	}

	// Lifted, the limit lets every write go, with the data it came with.
	if err := s.SetQoS(1, fabrics.QoSLimits{}); err != nil {
		t.Fatal(err)
	}
	for i := range qosTestWrites {
		r, err := throttled.WaitResponse(rdmahost.Timeout)
		if err != nil || rdmahost.Status(r) != 0 {
			t.Fatalf("write response %d of %d: %x, %v", i+1, qosTestWrites, r, err)
		}
	}
	for i := range qosTestWrites {
		cid := throttled.NextCID()
		addr, rkey, buf := throttled.Data(cid)
		r, err := throttled.Command(rdmahost.ReadCommand(cid, 1, uint64(i), 1, addr, qosTestBlock, rkey), nil)
		if err != nil || rdmahost.Status(r) != 0 {
			t.Fatalf("read back block %d: %x, %v", i, r, err)
		}
		if !bytes.Equal(buf[:qosTestBlock], pattern(i)) {
			t.Fatalf("block %d reads back % x..., want the write's % x...", i, buf[:8], pattern(i)[:8])
		}
	}
}

// dialController connects a controller of host to the QoS test's
// subsystem and returns its I/O queue 1 of depth entries. Both queues are
// abandoned when the test ends.
func dialController(t *testing.T, addr, host string, depth int) *rdmahost.Conn {
	t.Helper()
	admin, err := rdmahost.Dial(addr, qosTestPort, 0, 31)
	if err != nil {
		t.Fatalf("dial the admin queue: %v", err)
	}
	t.Cleanup(admin.Abandon)
	st, cntlid, err := admin.Connect(host, qosTestNQN, nvme.ControllerIDDynamic, 0)
	if err != nil || st != 0 {
		t.Fatalf("admin Connect: status %#x, %v", st, err)
	}
	if err := admin.Enable(); err != nil {
		t.Fatal(err)
	}
	io, err := rdmahost.Dial(addr, qosTestPort, 1, uint16(depth-1))
	if err != nil {
		t.Fatalf("dial the I/O queue: %v", err)
	}
	t.Cleanup(io.Abandon)
	if st, _, err := io.Connect(host, qosTestNQN, cntlid, 0); err != nil || st != 0 {
		t.Fatalf("I/O Connect: status %#x, %v", st, err)
	}
	return io
}
