//go:build !norbd

package daemon

import (
	"fmt"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/sharedstate"
)

// resvLoopHost is a host with an I/O queue on a daemon's target over the
// in-memory transport.
type resvLoopHost struct {
	t         *testing.T
	admin, io *fabrics.LoopQueue
}

func resvConnect(t *testing.T, tg *fabrics.Target, nqn string, id byte) *resvLoopHost {
	t.Helper()
	p := tg.Port(1)
	h := &resvLoopHost{t: t, admin: fabrics.NewLoopQueue(tg, p, 0, 32)}
	t.Cleanup(func() {
		if h.io != nil {
			h.io.Close()
		}
		h.admin.Close()
	})
	data := func(cntlid uint16) []byte {
		b := make([]byte, nvme.ConnectDataSize)
		nvme.ConnectData{HostID: [16]byte{id}, CNTLID: cntlid, SubNQN: nqn,
			HostNQN: fmt.Sprintf("nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000%02x", id)}.Encode(b)
		return b
	}
	c := loopCmd(nvme.OpFabrics, nvme.ConnectDataSize)
	c.SetConnect(0, 31, 0)
	rsp := h.submit(h.admin, c, data(nvme.ControllerIDDynamic))
	if rsp.Status() != 0 {
		t.Fatalf("connect host %d: %v", id, rsp.Status())
	}
	cntl := uint16(rsp.Result())
	c = loopCmd(nvme.OpFabrics, 0)
	c.SetProperty(true, false, nvme.RegCC, nvme.CCEnable|6<<nvme.CCIOSQEShift|4<<nvme.CCIOCQEShift)
	if st := h.submit(h.admin, c, nil).Status(); st != 0 {
		t.Fatalf("enable: %v", st)
	}
	h.io = fabrics.NewLoopQueue(tg, p, 1, 32)
	c = loopCmd(nvme.OpFabrics, nvme.ConnectDataSize)
	c.SetConnect(1, 31, 0)
	if st := h.submit(h.io, c, data(cntl)).Status(); st != 0 {
		t.Fatalf("I/O queue connect host %d: %v", id, st)
	}
	return h
}

func (h *resvLoopHost) submit(q *fabrics.LoopQueue, c nvme.Command, data []byte) nvme.Completion {
	h.t.Helper()
	rsp, err := q.Submit(c, data)
	if err != nil {
		h.t.Fatalf("opcode %#x: %v", c.Opcode(), err)
	}
	return rsp
}

func (h *resvLoopHost) resv(op, action, rtype uint8, k nvme.ResvKeys, n int) nvme.Status {
	c := loopCmd(op, n)
	c.SetNSID(1)
	c.SetResv(action, false, rtype, 0)
	b := make([]byte, n)
	k.Encode(b)
	return h.submit(h.io, c, b).Status()
}

func (h *resvLoopHost) write() nvme.Status {
	c := loopCmd(nvme.IOWrite, 512)
	c.SetNSID(1)
	return h.submit(h.io, c, make([]byte, 512)).Status()
}

func (h *resvLoopHost) report() nvme.ResvStatus {
	c := loopCmd(nvme.IOResvReport, 4096)
	c.SetNSID(1)
	c.SetCDW(10, 4096/4-1)
	c.SetCDW(11, 1) // extended
	b := make([]byte, 4096)
	if st := h.submit(h.io, c, b).Status(); st != 0 {
		h.t.Fatalf("report: %v", st)
	}
	s, _, err := nvme.ParseResvStatus(b, true)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// A reservation made through the owner of the group is enforced by the
// gateway that takes the group over: it read the state from the image
// before it turned optimized, not the one it loaded at its start.
func TestGatewayTakeoverKeepsReservations(t *testing.T) {
	env, image, prefix, confB := gatewayOnCluster(t, "gwresv")
	const nqn = "nqn.2026-11.io.example:gw"

	a, err := Start(parse(t, gatewayConfig(env, "a", env["CEPH_CONF"], image, prefix, 1)), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(time.Second) })
	waitGroup(t, a, gateway.Owner, 10*time.Second)
	b, err := Start(parse(t, gatewayConfig(env, "b", confB, image, prefix, 101)), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(time.Second) })

	// Host 1 registers and takes Write Exclusive through a; host 2
	// registers too. b, standing by, loaded the image's state before.
	h1a, h2a := resvConnect(t, a.target, nqn, 1), resvConnect(t, a.target, nqn, 2)
	for _, step := range []struct {
		name string
		st   nvme.Status
	}{
		{"host 1 registers", h1a.resv(nvme.IOResvRegister, nvme.ResvRegister, 0, nvme.ResvKeys{Other: 0xa1}, nvme.ResvRegisterSize)},
		{"host 2 registers", h2a.resv(nvme.IOResvRegister, nvme.ResvRegister, 0, nvme.ResvKeys{Other: 0xb2}, nvme.ResvRegisterSize)},
		{"host 1 acquires write exclusive", h1a.resv(nvme.IOResvAcquire, nvme.ResvAcquire, nvme.ResvWriteExclusive, nvme.ResvKeys{Current: 0xa1}, nvme.ResvAcquireSize)},
	} {
		if step.st != 0 {
			t.Fatalf("%s through a: %v", step.name, step.st)
		}
	}
	if st := h2a.write(); st != nvme.StatusReservationConflict|nvme.DNR {
		t.Fatalf("host 2's write through a: %v", st)
	}

	// The planned handover: b takes the group.
	h1b, h2b := resvConnect(t, b.target, nqn, 1), resvConnect(t, b.target, nqn, 2)
	if r, err := releaseGroup(t, a, 1); err != nil || !r.Released {
		t.Fatalf("release: %v %v", r, err)
	}
	waitGroup(t, b, gateway.Owner, 5*time.Second)
	rep := h1b.report()
	if rep.Type != nvme.ResvWriteExclusive || len(rep.Registrants) != 2 {
		t.Fatalf("report through b after the takeover: %+v", rep)
	}
	for _, r := range rep.Registrants {
		want := map[byte]uint64{1: 0xa1, 2: 0xb2}[r.HostID[0]]
		if r.Key != want || r.Holds != (r.HostID[0] == 1) {
			t.Fatalf("report through b: registrant %+v", r)
		}
	}
	if st := h2b.write(); st != nvme.StatusReservationConflict|nvme.DNR {
		t.Fatalf("host 2's write through b after the takeover: %v, want Reservation Conflict", st)
	}
	if st := h1b.write(); st != 0 {
		t.Fatalf("the holder's write through b: %v", st)
	}
	// A change through b is stored for the next owner: host 1 releases.
	if st := h1b.resv(nvme.IOResvRelease, nvme.ResvRelease, nvme.ResvWriteExclusive, nvme.ResvKeys{Current: 0xa1}, nvme.ResvReleaseSize); st != 0 {
		t.Fatalf("release through b: %v", st)
	}
	if st, err := sharedstate.NewImageStore(b.target.Subsystem(nqn).Namespace(1).Backend.(backend.ImageMetadata), image).Load(); err != nil || st.Type != 0 || len(st.Registrants) != 2 {
		t.Fatalf("stored after the release through b: %+v, %v", st, err)
	}
}
