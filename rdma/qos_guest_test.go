package rdma

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
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
	s, ns := g.s, g.ns
	if err := s.SetQoS(1, fabrics.QoSLimits{WriteIOPS: 1}); err != nil {
		t.Fatal(err)
	}

	throttled := g.controller(t, qosTestHostA, 128, rdmahost.Options{})
	other := g.controller(t, qosTestHostB, 32, rdmahost.Options{})

	// More writes than the shared receive queue has entries, each with
	// its block in the capsule.
	pattern := func(i int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, qosTestBlock) }
	for i := range qosTestWrites {
		cmd := rdmahost.WriteInlineCommand(throttled.NextCID(), 1, uint64(i), 1, qosTestBlock)
		if err := throttled.SendCapsule(cmd, pattern(i)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	waitFor(t, 10*time.Second, func() bool { return ns.QoSStats().Waiting >= qosTestSRQ }, func() string {
		return fmt.Sprintf("%d of %d writes wait on the limit, want at least the shared receive queue's %d", ns.QoSStats().Waiting, qosTestWrites, qosTestSRQ)
	})

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
