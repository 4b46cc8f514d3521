package fabrics

import (
	"bytes"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// inlineMem is memBackend run on the poller, as nullblk is: a pair runs
// inside the call that executes it, so what a test sees right after a
// submit is all that happened.
type inlineMem struct{ *memBackend }

func (inlineMem) NonBlocking() bool { return true }

// fusedDelayed submits a Compare (first) whose data is held back, as an
// RDMA READ in flight, then its Write (second), whose data arrives at once.
func fusedDelayed(h *host, slba uint64, expect, write []byte) (deliver func(), first, second <-chan nvme.Completion) {
	nlb := len(expect) / 512
	c := ioCmd(nvme.IOCompare, 1, slba, nlb, len(expect))
	c.SetFlags(c.Flags() | nvme.FuseFirst)
	c.SetCID(1000)
	deliver, first = h.io.SubmitDelayed(c, expect)
	w := ioCmd(nvme.IOWrite, 1, slba, nlb, len(write))
	w.SetFlags(w.Flags() | nvme.FuseSecond)
	w.SetCID(1001)
	return deliver, first, h.io.SubmitAsync(w, write)
}

// A Write whose data arrives before its Compare's waits for the Compare:
// the first command never completes before its data landed, and the pair
// then runs as if in order.
func TestFusedSecondWaitsForFirstsData(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inline bool
	}{{"on the poller", true}, {"on a worker", false}} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMem(1<<20, 512)
			var tg *Target
			var p *Port
			if tc.inline {
				tg, p = targetWith(t, inlineMem{mem})
			} else {
				tg, p = targetWith(t, mem)
			}
			h := connect(t, tg, p, testNQN)
			old, nu := bytes.Repeat([]byte{1}, 512), bytes.Repeat([]byte{2}, 512)
			copy(mem.data[4096:], old)
			deliver, first, second := fusedDelayed(h, 8, old, nu)
			if tc.inline && h.io.EarlyCompletions() != 0 {
				t.Fatal("the first command completed while its data was on the way")
			}
			deliver()
			rsp := <-second
			if rsp == nil || rsp.Status() != 0 {
				t.Fatalf("second: %v, want success", rsp)
			}
			if rsp = <-first; rsp == nil || rsp.Status() != 0 {
				t.Fatalf("first: %v, want success", rsp)
			}
			if n := h.io.EarlyCompletions(); n != 0 {
				t.Fatalf("%d completions before the data arrived", n)
			}
			if !bytes.Equal(mem.data[4096:4608], nu) {
				t.Fatal("the pair did not write")
			}
		})
	}
}

// A queue torn down while a second waits for its first's data closes at
// once: nothing of the pair is held outside the poller.
func TestFusedCloseWithSecondWaiting(t *testing.T) {
	tg, p, mem := testTarget(t)
	h := connect(t, tg, p, testNQN)
	old := bytes.Repeat([]byte{1}, 512)
	copy(mem.data[4096:], old)
	_, _, _ = fusedDelayed(h, 8, old, bytes.Repeat([]byte{2}, 512))
	h.io.Close() // hangs (go test -timeout) if the pair holds the queue
	if !bytes.Equal(mem.data[4096:4608], old) {
		t.Fatal("the pair wrote without its compare")
	}
}

// A first command the transport fails (its data pointer is bad) is no
// longer waiting: its second finds no partner instead of pairing with a
// completed command.
func TestFusedFirstFailedByTransport(t *testing.T) {
	tg, p := targetWith(t, inlineMem{newMem(1<<20, 512)})
	h := connect(t, tg, p, testNQN)
	c := ioCmd(nvme.IOCompare, 1, 8, 1, 512)
	c.SetFlags(c.Flags() | nvme.FuseFirst)
	c.SGL().SetOffset(nvme.SGLDataBlockOffset, 16, 512) // past the in-capsule data
	if st := h.submit(h.io, c, make([]byte, 512)).Status(); st != nvme.StatusSGLInvalidOffset|nvme.DNR {
		t.Fatalf("first with a bad offset: %v", st)
	}
	h.io.mu.Lock()
	waiting := h.io.Queue.fuseFirst
	h.io.mu.Unlock()
	if waiting != nil {
		t.Fatal("a failed first command still waits for its second")
	}
	w := ioCmd(nvme.IOWrite, 1, 8, 1, 512)
	w.SetFlags(w.Flags() | nvme.FuseSecond)
	if st := h.submit(h.io, w, make([]byte, 512)).Status(); st != nvme.StatusFusedMissing|nvme.DNR {
		t.Fatalf("second after a failed first: %v", st)
	}
}

// A second the transport fails fails its first too, rather than leaving
// it waiting for a partner that will never run.
func TestFusedSecondFailedByTransport(t *testing.T) {
	tg, p := targetWith(t, inlineMem{newMem(1<<20, 512)})
	h := connect(t, tg, p, testNQN)
	c := ioCmd(nvme.IOCompare, 1, 8, 1, 512)
	c.SetFlags(c.Flags() | nvme.FuseFirst)
	first := h.io.SubmitAsync(c, make([]byte, 512))
	w := ioCmd(nvme.IOWrite, 1, 8, 1, 512)
	w.SetFlags(w.Flags() | nvme.FuseSecond)
	w.SGL().SetOffset(nvme.SGLDataBlockOffset, 16, 512) // past the in-capsule data
	if st := h.submit(h.io, w, make([]byte, 512)).Status(); st != nvme.StatusSGLInvalidOffset|nvme.DNR {
		t.Fatalf("second with a bad offset: %v", st)
	}
	if rsp := <-first; rsp == nil || rsp.Status() != nvme.StatusFusedFail {
		t.Fatalf("first of a failed second: %v, want %v", rsp, nvme.StatusFusedFail)
	}
}
