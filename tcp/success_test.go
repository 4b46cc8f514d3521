package tcp

import (
	"bytes"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// With SQ flow control disabled at Connect, a read that succeeds ends with
// its C2HData's SUCCESS flag and no CapsuleResp (admin and I/O queues, with
// and without digests); a read that fails still gets its CapsuleResp, and
// so does every read of a queue that kept SQ flow control. Each exec
// checks that the next PDU is its own command's: a stray CapsuleResp would
// fail the next one.
func TestC2HDataSuccess(t *testing.T) {
	for _, dg := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "digests"}[dg], func(t *testing.T) {
			l := targetListener(t)
			admin := dial(t, l)
			admin.icreq(dg, dg)
			admin.cattr = nvme.ConnectSQFlowDisable
			admin.connectAdmin(testNQN)
			if _, st := admin.identify(nvme.CNSController, 0); st != 0 || admin.successes != 1 {
				t.Fatalf("identify: %v, %d completed by SUCCESS, want 1", st, admin.successes)
			}

			io := dial(t, l)
			io.icreq(dg, dg)
			c := newCmd(nvme.OpFabrics)
			c.SetConnect(1, 127, 0)
			c.SetConnectCAttr(nvme.ConnectSQFlowDisable)
			c.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, nvme.ConnectDataSize)
			rsp := io.exec(c, connectData(testNQN, admin.cntl), nil, nil)
			if rsp.Status() != 0 || rsp.SQHD() != nvme.SQHDFlowDisabled {
				t.Fatalf("I/O connect: %v, SQHD %#x, want FFFFh", rsp.Status(), rsp.SQHD())
			}
			data := bytes.Repeat([]byte{0x5a}, 8192)
			if st := io.write(8, data, false); st != 0 {
				t.Fatalf("write: %v", st)
			}
			got := make([]byte, len(data))
			for i := range 3 {
				clear(got)
				if st := io.read(8, got); st != 0 || !bytes.Equal(got, data) {
					t.Fatalf("read %d: %v, data equal %v", i, st, bytes.Equal(got, data))
				}
			}
			if io.successes != 3 {
				t.Fatalf("%d reads completed by SUCCESS, want 3", io.successes)
			}
			if st := io.read(1<<20, got); st != nvme.StatusLBARange|nvme.DNR {
				t.Fatalf("read past the end: %v, want LBA Out of Range", st)
			}
			if io.successes != 3 {
				t.Fatal("a failed read was completed by SUCCESS")
			}
			if st := io.read(8, got); st != 0 || io.successes != 4 {
				t.Fatalf("read after a failed one: %v, %d by SUCCESS", st, io.successes)
			}

			admin2 := dial(t, l)
			admin2.icreq(dg, dg)
			admin2.connectAdmin(testNQN)
			if _, st := admin2.identify(nvme.CNSController, 0); st != 0 || admin2.successes != 0 {
				t.Fatalf("identify with SQ flow control: %v, %d by SUCCESS, want a CapsuleResp", st, admin2.successes)
			}
			flow := dial(t, l)
			flow.icreq(dg, dg)
			if st := flow.connectIO(testNQN, admin2.cntl, true); st != 0 {
				t.Fatalf("I/O connect with SQ flow control: %v", st)
			}
			if st := flow.read(8, got); st != 0 || flow.successes != 0 {
				t.Fatalf("read with SQ flow control: %v, %d by SUCCESS, want a CapsuleResp", st, flow.successes)
			}
		})
	}
}
