package tcp

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// qosHost connects an I/O queue to a target whose namespace 1 is limited
// to 10 IOPS on a manual clock: the bucket holds one command, and one
// more fits every 100 ms of the clock.
func qosHost(t *testing.T, dataDigest bool) (*Listener, *fabrics.Namespace, *fabrics.ManualClock, *testHost) {
	t.Helper()
	tg, p, _ := testTarget(t)
	clk := &fabrics.ManualClock{}
	tg.SetClock(clk)
	s := tg.Subsystem(testNQN)
	if err := s.SetQoS(1, fabrics.QoSLimits{IOPS: 10}); err != nil {
		t.Fatal(err)
	}
	l := testListener(t, tg, p)
	h := ioQueue(t, l, adminHost(t, l, false, false), false, dataDigest)
	return l, s.Namespace(1), clk, h
}

// waitWaiting waits until n commands of ns wait on its limit.
func waitWaiting(t *testing.T, ns *fabrics.Namespace, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ns.QoSStats().Waiting != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d commands wait on the QoS limit, want %d", ns.QoSStats().Waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// sendWrite sends a write of data at slba without waiting for it: in the
// capsule, or with its data to come on R2T.
func (h *testHost) sendWrite(cid uint16, slba uint64, data []byte, inline bool) {
	var cmd [nvme.CommandSize]byte
	rwCmd(cmd[:], nvme.IOWrite, slba, len(data), inline)
	nvme.Command(cmd[:]).SetCID(cid)
	if inline {
		h.sendCapsule(cmd[:], data)
	} else {
		h.sendCapsule(cmd[:], nil)
	}
	if h.err != nil {
		h.t.Fatalf("write %d: %v", cid, h.err)
	}
}

// expectResponse reads the PDUs of command cid up to its response,
// sending data on its R2T, and checks its status.
func (h *testHost) expectResponse(cid uint16, data []byte, want nvme.Status) {
	h.t.Helper()
	for {
		hh, err := h.readPDU(nil)
		if err != nil {
			h.t.Fatalf("command %d: %v", cid, err)
		}
		switch hh.Type() {
		case TypeR2T:
			if hh.CID() != cid || uint64(hh.Offset())+uint64(hh.Length()) > uint64(len(data)) {
				h.t.Fatalf("R2T for command %d, %d bytes at %d: want a response for command %d", hh.CID(), hh.Length(), hh.Offset(), cid)
			}
			h.sendH2C(cid, hh.TTag(), hh.Offset(), data[hh.Offset():hh.Offset()+hh.Length()], true)
		case TypeCapsuleRsp:
			rsp := nvme.Completion(hh.Response())
			if rsp.CID() != cid || rsp.Status() != want {
				h.t.Fatalf("response for command %d status %v, want command %d's, %v", rsp.CID(), rsp.Status(), cid, want)
			}
			return
		default:
			h.t.Fatalf("command %d: unexpected PDU type %#x", cid, hh.Type())
		}
	}
}

// Commands over a namespace's limit wait on TCP as on RDMA, holding no
// pool buffer but their in-capsule data's, and go in order as the clock lets them: a write with
// in-capsule data keeps its data while the connection receives more
// PDUs, and a write whose data comes on R2T gets its R2T only then.
func TestQoSHoldsCommands(t *testing.T) {
	l, ns, clk, h := qosHost(t, false)
	first := bytes.Repeat([]byte{1}, 512)
	if st := h.write(0, first, false); st != 0 { // takes the bucket's one command
		t.Fatalf("first write: %v", st)
	}
	inl, r2t := bytes.Repeat([]byte{0xa5}, 4096), bytes.Repeat([]byte{0x5a}, 8192)
	h.sendWrite(100, 8, inl, true)
	h.sendWrite(101, 64, r2t, false)
	waitWaiting(t, ns, 2)
	if n := l.srv.pool.Lent(); n != int64(len(inl)) {
		t.Fatalf("waiting commands hold %d pool bytes, want the in-capsule data's %d only", n, len(inl))
	}

	clk.Advance(100 * time.Millisecond)
	h.expectResponse(100, nil, 0)
	if n := ns.QoSStats().Waiting; n != 1 {
		t.Fatalf("%d commands wait after one was let go, want 1", n)
	}
	clk.Advance(100 * time.Millisecond)
	h.expectResponse(101, r2t, 0)
	if s := ns.QoSStats(); s.Waiting != 0 || s.Throttled != 2 {
		t.Fatalf("QoS stats %+v, want 2 throttled and none waiting", s)
	}

	if err := tgSubsystem(l).SetQoS(1, fabrics.QoSLimits{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		slba uint64
		data []byte
	}{{0, first}, {8, inl}, {64, r2t}} {
		got := make([]byte, len(w.data))
		if st := h.read(w.slba, got); st != 0 {
			t.Fatalf("read at %d: %v", w.slba, st)
		}
		if !bytes.Equal(got, w.data) {
			t.Fatalf("data at block %d is not what was written", w.slba)
		}
	}
}

func tgSubsystem(l *Listener) *fabrics.Subsystem { return l.srv.target.Subsystem(testNQN) }

// A connection closed with commands waiting on the limit tears down: the
// waiters leave the gate, and the pool is back to empty.
func TestQoSTeardownWithWaiters(t *testing.T) {
	l, ns, _, h := qosHost(t, false)
	if st := h.write(0, make([]byte, 512), false); st != 0 {
		t.Fatalf("first write: %v", st)
	}
	h.sendWrite(100, 8, make([]byte, 4096), true)
	h.sendWrite(101, 64, make([]byte, 8192), false)
	waitWaiting(t, ns, 2)
	h.c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for l.QueuePairs() != 1 { // the admin queue's connection stays
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, want the admin queue's only", l.QueuePairs())
		}
		time.Sleep(time.Millisecond)
	}
	if s := ns.QoSStats(); s.Waiting != 0 {
		t.Fatalf("%d commands still wait after their connection closed", s.Waiting)
	}
	waitLent(t, l.srv.pool, 0)
}

// A write whose in-capsule data failed its digest waits like any other
// and then fails with Transient Transport Error; the write behind it runs.
func TestQoSDataDigestErrorWhileWaiting(t *testing.T) {
	_, ns, clk, h := qosHost(t, true)
	if st := h.write(0, make([]byte, 512), false); st != 0 {
		t.Fatalf("first write: %v", st)
	}
	bad := bytes.Repeat([]byte{0x33}, 4096)
	rwCmd(h.cmd[:], nvme.IOWrite, 8, len(bad), true)
	nvme.Command(h.cmd[:]).SetCID(100)
	PutCommon(h.out[:], TypeCapsuleCmd, FlagDDGST, CapsuleCmdHLen, CapsuleCmdHLen, uint32(CapsuleCmdHLen+len(bad)+DigestSize))
	copy(h.out[CommonHeaderSize:], h.cmd[:])
	h.send(h.out[:CapsuleCmdHLen])
	h.send(bad)
	PutDigest(h.dig[:], Digest(bad)+1)
	h.send(h.dig[:])
	h.sendWrite(101, 16, make([]byte, 4096), true)
	waitWaiting(t, ns, 2)

	clk.Advance(100 * time.Millisecond)
	h.expectResponse(100, nil, nvme.StatusTransientTransport)
	clk.Advance(100 * time.Millisecond)
	h.expectResponse(101, nil, 0)
}

// A command let go while its connection is going away completes aborted
// and starts no transfer: here the connection closes on a fatal error
// but still has a read's data to send (the host is not reading), and
// the waiting write is let go meanwhile.
func TestQoSResumeOnClosingConnection(t *testing.T) {
	l, ns, clk, h := qosHost(t, false)
	// A read larger than the socket buffers takes the bucket's one
	// command and keeps the connection's send queue full.
	rwCmd(h.cmd[:], nvme.IORead, 0, fabrics.MaxDataTransfer, false)
	nvme.Command(h.cmd[:]).SetCID(99)
	h.sendCapsule(h.cmd[:], nil)
	var c2h [CommonHeaderSize]byte
	if _, err := io.ReadFull(h.c, c2h[:]); err != nil || Header(c2h[:]).Type() != TypeC2HData {
		t.Fatalf("read's C2HData: %x, %v", c2h, err)
	}
	h.sendWrite(100, 64, make([]byte, 8192), false)
	waitWaiting(t, ns, 1)
	before := l.srv.stats.TermReqs.Load()
	h.sendH2C(999, 0, 0, make([]byte, 512), true) // no R2T asked for it: fatal
	deadline := time.Now().Add(10 * time.Second)
	for l.srv.stats.TermReqs.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("no C2HTermReq for H2CData without an R2T")
		}
		time.Sleep(time.Millisecond)
	}

	clk.Advance(100 * time.Millisecond)
	// The poller resumes the command the limit let go, which completes it
	// aborted, before the read's data is drained: drained first, the
	// connection could end before it took the command back from the
	// limit, and the command would end with the queue, unanswered.
	deadline = time.Now().Add(10 * time.Second)
	for ns.InFlight() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d commands still in flight on the namespace after the limit let command 100 go", ns.InFlight())
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := io.CopyN(io.Discard, h.c, int64(Header(c2h[:]).PLen())-CommonHeaderSize); err != nil {
		t.Fatalf("read's data: %v", err)
	}
	if rsp, err := h.readPDU(nil); err != nil || rsp.Type() != TypeCapsuleRsp || nvme.Completion(rsp.Response()).CID() != 99 {
		t.Fatalf("read's response: %v", err)
	}
	if term, err := h.readPDU(nil); err != nil || term.Type() != TypeC2HTermReq {
		t.Fatalf("C2HTermReq: %v", err)
	}
	h.expectResponse(100, nil, nvme.StatusAbortSQDeleted)
	expectClosed(t, h)
	waitLent(t, l.srv.pool, 0)
}
