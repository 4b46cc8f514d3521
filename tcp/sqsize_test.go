package tcp

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A host that connected its I/O queue with SQSIZE 32 may have 32
// commands submitted that no completion reported consumed; the 33rd is
// an overrun, however deep the port's queues are: C2HTermReq, and the
// connection closes.
func TestOverrunOfTheHostsSQSize(t *testing.T) {
	tg, p, _ := testTarget(t) // the port's queues are 128 deep
	l := testListener(t, tg, p)
	admin := adminHost(t, l, false, false)
	h := pair(t, l)
	h.icreq(false, false)
	c := newCmd(nvme.OpFabrics)
	c.SetConnect(1, 31, 0) // SQSIZE 32
	c.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, nvme.ConnectDataSize)
	if rsp := h.exec(c, connectData(testNQN, admin.cntl), nil, nil); rsp.Status() != 0 {
		t.Fatalf("I/O connect: %v", rsp.Status())
	}
	before := l.srv.stats.Overruns.Load()
	// Writes whose data never comes: no completion reports them.
	sendWrites(h, 33, 4096)
	h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r2ts := 0
	for {
		hh, err := h.readPDU(nil)
		if err != nil {
			t.Fatalf("after %d R2Ts: %v; want a C2HTermReq", r2ts, err)
		}
		if hh.Type() != TypeR2T {
			if hh.Type() != TypeC2HTermReq || hh.FES() != FESSequence {
				t.Fatalf("after %d R2Ts: PDU type %#x FES %#x; want C2HTermReq FES %#x", r2ts, hh.Type(), hh.FES(), FESSequence)
			}
			break
		}
		r2ts++
	}
	if r2ts != 32 {
		t.Fatalf("%d R2Ts before the C2HTermReq, want 32", r2ts)
	}
	expectClosed(t, h)
	if n := l.srv.stats.Overruns.Load() - before; n != 1 {
		t.Fatalf("%d overruns counted, want 1", n)
	}
}
