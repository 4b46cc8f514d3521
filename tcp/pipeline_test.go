package tcp

import (
	"bytes"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend/uring"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A host keeps many commands in flight on one connection, as the Linux
// host does: writes of up to 1 MiB on R2T and in the capsule, and reads,
// sent before any response is read. Every command completes, with both
// I/O engines, and the data reads back.
func TestPipelinedCommands(t *testing.T) {
	engines := []fabrics.IOEngine{fabrics.EngineThreads}
	if uring.Probe() == nil {
		engines = append(engines, fabrics.EngineIOURing)
	}
	for _, e := range engines {
		for _, dig := range []bool{false, true} {
			t.Run(e.String()+map[bool]string{false: "", true: "-digests"}[dig], func(t *testing.T) {
				tg, p, _ := testTarget(t)
				tg.SetIOEngine(e)
				l := testListener(t, tg, p)
				h := ioHost(t, l, dig, dig)
				pipeline(t, h)
			})
		}
	}
}

func pipeline(t *testing.T, h *testHost) {
	const n = 18 // 3.7 MiB of the 4 MiB namespace
	sizes := []int{4096, 8192, 12288, 128 << 10, 1 << 20, 65536 + 512}
	type cmd struct {
		cmd  nvme.Command
		data []byte
		slba uint64
	}
	cmds := map[uint16]*cmd{}
	slba := uint64(0)
	for i := range n {
		size := sizes[i%len(sizes)]
		c := &cmd{cmd: make(nvme.Command, nvme.CommandSize), data: bytes.Repeat([]byte{byte(i + 1)}, size), slba: slba}
		slba += uint64(size / 512)
		inline := size <= 8192
		rwCmd(c.cmd, nvme.IOWrite, c.slba, size, inline)
		h.cid++
		c.cmd.SetCID(h.cid)
		cmds[h.cid] = c
		if inline {
			h.sendCapsule(c.cmd, c.data)
		} else {
			h.sendCapsule(c.cmd, nil)
		}
	}
	if h.err != nil {
		t.Fatal(h.err)
	}
	for done := 0; done < n; {
		hh, err := h.readPDU(nil)
		if err != nil {
			t.Fatalf("after %d of %d writes: %v", done, n, err)
		}
		switch hh.Type() {
		case TypeR2T:
			c := cmds[hh.CID()]
			off, left := hh.Offset(), hh.Length()
			for left > 0 {
				k := min(left, h.maxH2C)
				h.sendH2C(hh.CID(), hh.TTag(), off, c.data[off:off+k], k == left)
				off, left = off+k, left-k
			}
		case TypeCapsuleRsp:
			if st := nvme.Completion(hh.Response()).Status(); st != 0 {
				t.Fatalf("write %d: %v", nvme.Completion(hh.Response()).CID(), st)
			}
			done++
		default:
			t.Fatalf("PDU type %#x", hh.Type())
		}
	}
	for _, c := range cmds {
		got := make([]byte, len(c.data))
		if st := h.read(c.slba, got); st != 0 || !bytes.Equal(got, c.data) {
			t.Fatalf("read back at %d: status %v, equal %v", c.slba, st, bytes.Equal(got, c.data))
		}
	}
}
