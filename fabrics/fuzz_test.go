package fabrics

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// FuzzDispatch sends arbitrary command capsules, with arbitrary data, to a
// connected controller's admin and I/O queues. Every one must complete
// with some status, and the queues must keep working.
func FuzzDispatch(f *testing.F) {
	seed := func(q uint8, op uint8, mod func(nvme.Command)) {
		c := newCmd(op)
		if mod != nil {
			mod(c)
		}
		f.Add(q, []byte(c), []byte{1, 2, 3, 4})
	}
	seed(0, nvme.AdminIdentify, func(c nvme.Command) { keyed(c, 4096); c.SetCDW(10, 1) })
	seed(0, nvme.AdminGetLogPage, func(c nvme.Command) { keyed(c, 512); c.SetCDW(10, 2|127<<16) })
	seed(0, nvme.OpFabrics, func(c nvme.Command) { c.SetProperty(false, true, 0, 0) })
	seed(1, nvme.IOWrite, func(c nvme.Command) { c.SetNSID(1); c.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, 4) })
	seed(1, nvme.IORead, func(c nvme.Command) { c.SetNSID(1); keyed(c, 512) })
	seed(1, nvme.IODatasetMgmt, func(c nvme.Command) { c.SetNSID(1); c.SetCDW(11, 4); keyed(c, 16) })
	f.Fuzz(func(t *testing.T, which uint8, sqe []byte, data []byte) {
		if len(sqe) < nvme.CommandSize {
			return
		}
		cmd := nvme.Command(append([]byte(nil), sqe[:nvme.CommandSize]...))
		tg, p, _ := testTarget(t)
		h := connect(t, tg, p, testNQN)
		q := h.io
		if which%2 == 0 {
			q = h.admin
			if cmd.Opcode() == nvme.AdminAsyncEvent {
				return // held until an event: covered by its own test
			}
		}
		// The host's buffer is as long as its SGL says.
		if sgl := cmd.SGL(); sgl.Type() == nvme.SGLTypeKeyed {
			buf := make([]byte, sgl.KeyedLength())
			copy(buf, data)
			data = buf
		}
		if _, err := q.Submit(cmd, data); err != nil && !q.Disconnected() {
			t.Fatalf("submit: %v", err)
		}
		if h.admin.Disconnected() {
			return // a reset or shutdown through Property Set
		}
		if c := h.admin.Queue.Controller(); c != nil && !c.enabled() {
			// Disabled through Property Set: only Fabrics commands run.
			h.getProperty(nvme.RegCSTS, false)
			return
		}
		// The controller still answers.
		if _, st := h.identify(nvme.CNSController, 0); st != 0 {
			t.Fatalf("identify after fuzzed command: %v", st)
		}
	})
}
