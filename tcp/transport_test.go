package tcp

import (
	"encoding/binary"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A TCP controller offers no keyed SGLs (RDMA memory keys) and one data
// descriptor per command, and its error log names TCP.
func TestTCPControllerAnswers(t *testing.T) {
	l := targetListener(t)
	h := dial(t, l)
	h.icreq(false, false)
	h.connectAdmin(testNQN)
	id, st := h.identify(nvme.CNSController, 0)
	if st != 0 {
		t.Fatalf("identify: %v", st)
	}
	if sgls := binary.LittleEndian.Uint32(id[536:]); sgls&nvme.SGLSKeyed != 0 || sgls&nvme.SGLSSupported == 0 {
		t.Errorf("SGLS %#x: want SGLs without keyed descriptors", sgls)
	}
	if msdbd := id[1803]; msdbd != 1 {
		t.Errorf("MSDBD %d, want 1", msdbd)
	}
	if _, st := h.identify(0x7f, 0); st == 0 {
		t.Fatal("identify of an unknown CNS succeeded")
	}
	c := newCmd(nvme.AdminGetLogPage)
	transportSGL(c, nvme.ErrorLogEntrySize)
	c.SetCDW(10, uint32(nvme.LogError)|uint32(nvme.ErrorLogEntrySize/4-1)<<16)
	page := make([]byte, nvme.ErrorLogEntrySize)
	if st := h.exec(c, nil, nil, page).Status(); st != 0 {
		t.Fatalf("error log: %v", st)
	}
	if binary.LittleEndian.Uint64(page) == 0 {
		t.Fatal("error log empty after a failed command")
	}
	if tr := page[29]; tr != nvme.TransportTCP {
		t.Fatalf("error log TRTYPE %d, want TCP (%d)", tr, nvme.TransportTCP)
	}
}
