package fabrics

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A Connect with SQ flow control disabled (CATTR bit 2) answers SQHD
// FFFFh and the queue's completions after it carry 0; a Connect without
// it gets a counting SQ head.
func TestSQFlowControlDisabled(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	for qid, off := range map[uint16]bool{2: false, 3: true} {
		lq := NewLoopQueue(tg, p, qid, 32)
		t.Cleanup(lq.Close)
		c := connectCmd(qid, 31, 0, true)
		if off {
			c.SetConnectCAttr(nvme.ConnectSQFlowDisable)
		}
		rsp := h.submit(lq, c, connectData(testNQN, testHost, h.cntl))
		if rsp.Status() != 0 {
			t.Fatalf("connect (flow control off %t): %v", off, rsp.Status())
		}
		if got := lq.Queue.SQFlowControlDisabled(); got != off {
			t.Fatalf("SQFlowControlDisabled %t after a Connect with it %t", got, off)
		}
		if off && rsp.SQHD() != nvme.SQHDFlowDisabled || !off && rsp.SQHD() != 0 {
			t.Fatalf("Connect SQHD %#x (flow control off %t)", rsp.SQHD(), off)
		}
		flush := flushCmd(1)
		rsp = h.submit(lq, flush, nil)
		if want := map[bool]uint16{false: 1, true: 0}[off]; rsp.Status() != 0 || rsp.SQHD() != want {
			t.Fatalf("flush: %v, SQHD %d, want %d (flow control off %t)", rsp.Status(), rsp.SQHD(), want, off)
		}
	}
}
