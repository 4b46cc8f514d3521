package fabrics

import (
	"encoding/binary"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// On an RDMA queue pair (the loop stands in for one) Identify Controller
// offers keyed SGLs and descriptor lists, and the error log names RDMA.
// A TCP controller's answers are tested in tcp/.
func TestRDMAControllerAnswers(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	id, st := h.identify(nvme.CNSController, 0)
	if st != 0 {
		t.Fatalf("identify: %v", st)
	}
	if sgls := binary.LittleEndian.Uint32(id[536:]); sgls&nvme.SGLSKeyed == 0 {
		t.Errorf("SGLS %#x: keyed SGLs missing on RDMA", sgls)
	}
	if msdbd := id[1803]; msdbd != MaxKeyedDescriptors {
		t.Errorf("MSDBD %d, want %d", msdbd, MaxKeyedDescriptors)
	}
	if _, st := h.identify(0x7f, 0); st == 0 {
		t.Fatal("identify of an unknown CNS succeeded")
	}
	page, st := h.getLog(nvme.LogError, nvme.ErrorLogEntrySize, 0)
	if st != 0 {
		t.Fatalf("error log: %v", st)
	}
	if tr := page[29]; tr != nvme.TransportRDMA {
		t.Fatalf("error log TRTYPE %d, want RDMA (%d)", tr, nvme.TransportRDMA)
	}
}

// A Connect naming another queue than the one the queue pair was set up
// for is logged with where that queue ID came from, per transport.
func TestQIDOrigin(t *testing.T) {
	if got := qidOrigin(stubTransport{}); got != "in the RDMA connection request" {
		t.Errorf("RDMA: %q", got)
	}
	if got := qidOrigin(tcpStub{}); got != "of the connection's first command" {
		t.Errorf("TCP: %q", got)
	}
}

type tcpStub struct{ stubTransport }

func (tcpStub) TRType() uint8 { return nvme.TransportTCP }
