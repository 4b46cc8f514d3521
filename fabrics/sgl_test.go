package fabrics

import (
	"bytes"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// lastSegment builds a command whose data is described by a list of keyed
// descriptors carried in-capsule, and the list itself.
func lastSegment(c nvme.Command, pieces [][2]int) (nvme.Command, []byte) {
	list := make([]byte, len(pieces)*nvme.SGLSize)
	for i, p := range pieces {
		nvme.SGLDescriptor(list[i*nvme.SGLSize:]).SetKeyed(uint64(p[0]), uint32(p[1]), uint32(i+1), false)
	}
	c.SGL().SetOffset(nvme.SGLLastSegmentOffset, 0, uint32(len(list)))
	return c, list
}

func TestLastSegmentKeyedDescriptors(t *testing.T) {
	tg, p, mem := testTarget(t)
	h := connect(t, tg, p, testNQN)
	// Host memory: the 4 KiB write comes from three separate pieces.
	host := make([]byte, 16384)
	for i := range host {
		host[i] = byte(i / 1024)
	}
	pieces := [][2]int{{0, 1024}, {8192, 2048}, {4096, 1024}}
	w, list := lastSegment(ioCmd(nvme.IOWrite, 1, 0, 8, 4096), pieces)
	h.cid++
	w.SetCID(h.cid)
	rsp, err := h.io.SubmitSGL(w, list, host)
	if err != nil || rsp.Status() != 0 {
		t.Fatalf("write: %v %v", err, rsp.Status())
	}
	want := append(append(append([]byte{}, host[0:1024]...), host[8192:10240]...), host[4096:5120]...)
	if !bytes.Equal(mem.data[:4096], want) {
		t.Fatal("gathered write landed wrong")
	}
	// Read it back scattered the same way.
	out := make([]byte, 16384)
	r, list := lastSegment(ioCmd(nvme.IORead, 1, 0, 8, 4096), pieces)
	h.cid++
	r.SetCID(h.cid)
	if rsp, err := h.io.SubmitSGL(r, list, out); err != nil || rsp.Status() != 0 {
		t.Fatalf("read: %v %v", err, rsp.Status())
	}
	if !bytes.Equal(out[0:1024], host[0:1024]) || !bytes.Equal(out[8192:10240], host[8192:10240]) || !bytes.Equal(out[4096:5120], host[4096:5120]) {
		t.Fatal("scattered read landed wrong")
	}
}

func TestLastSegmentErrors(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	host := make([]byte, 8192)
	cases := []struct {
		name   string
		build  func() (nvme.Command, []byte)
		status nvme.Status
	}{
		{"too short", func() (nvme.Command, []byte) {
			return lastSegment(ioCmd(nvme.IOWrite, 1, 0, 8, 4096), [][2]int{{0, 1024}})
		}, nvme.StatusSGLInvalidData | nvme.DNR},
		{"too many", func() (nvme.Command, []byte) {
			var ps [][2]int
			for range MaxKeyedDescriptors + 1 {
				ps = append(ps, [2]int{0, 512})
			}
			return lastSegment(ioCmd(nvme.IOWrite, 1, 0, 8, 4096), ps)
		}, nvme.StatusSGLInvalidCount | nvme.DNR},
		{"list outside the capsule", func() (nvme.Command, []byte) {
			c, list := lastSegment(ioCmd(nvme.IOWrite, 1, 0, 8, 4096), [][2]int{{0, 4096}})
			c.SGL().SetOffset(nvme.SGLLastSegmentOffset, 64, 16)
			return c, list
		}, nvme.StatusSGLInvalidOffset | nvme.DNR},
		{"non-keyed entry", func() (nvme.Command, []byte) {
			c, list := lastSegment(ioCmd(nvme.IOWrite, 1, 0, 8, 4096), [][2]int{{0, 4096}})
			list[15] = nvme.SGLDataBlockOffset
			return c, list
		}, nvme.StatusSGLInvalidType | nvme.DNR},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, list := tc.build()
			rsp, err := h.io.SubmitSGL(c, list, host)
			if err != nil || rsp.Status() != tc.status {
				t.Fatalf("status %v err %v, want %v", rsp.Status(), err, tc.status)
			}
		})
	}
	if st := h.rw(nvme.IORead, 1, 0, 1, make([]byte, 512), false); st != 0 {
		t.Fatalf("queue unhealthy after bad SGLs: %v", st)
	}
}

// A host that stops sending Keep Alive loses its controller and queues.
func TestKeepAliveExpiry(t *testing.T) {
	tg, p, _ := testTarget(t)
	clk := &ManualClock{}
	tg.SetClock(clk)
	admin := NewLoopQueue(tg, p, 0, 32)
	defer admin.Close()
	rsp, err := admin.Submit(connectCmd(0, 31, 100, false), connectData(testNQN, testHost, 0xffff))
	if err != nil || rsp.Status() != 0 {
		t.Fatalf("connect: %v %v", err, rsp)
	}
	if n := len(tg.Subsystem(testNQN).Controllers()); n != 1 {
		t.Fatalf("%d controllers after connect", n)
	}
	clk.Advance(100*time.Millisecond + keepAliveSlack - time.Millisecond)
	if admin.Disconnected() {
		t.Fatal("admin queue gone before its 100 ms keep-alive timeout (plus slack)")
	}
	clk.Advance(time.Millisecond)
	if !admin.Disconnected() {
		t.Fatal("admin queue still connected after a 100 ms keep-alive timeout (plus slack)")
	}
	if n := len(tg.Subsystem(testNQN).Controllers()); n != 0 {
		t.Fatalf("%d controllers left after keep-alive expiry", n)
	}
}
