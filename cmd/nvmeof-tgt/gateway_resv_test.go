//go:build !norbd

package main

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	cephtest "github.com/nvmeof-tgt/nvmeof-tgt/test/ceph"
)

// createTestImage creates a 16 MiB image of its own in the test pool.
func createTestImage(t *testing.T, env map[string]string, prefix string) string {
	t.Helper()
	image := fmt.Sprintf("%s%d", prefix, time.Now().UnixNano())
	out, err := exec.Command("rbd", "--conf", env["CEPH_CONF"], "--id", "admin", "--keyring", env["CEPH_ADMIN_KEYRING"],
		"create", "--size", "16M", env["CEPH_POOL"]+"/"+image).CombinedOutput()
	if err != nil {
		t.Fatalf("rbd create: %v\n%s", err, out)
	}
	return image
}

// Two stores on one image, as two gateways have: the one that missed the
// other's change is refused with ErrReservationChanged and leaves the
// stored state alone; once it has read it, its change applies.
func TestImageResvStoreOnCluster(t *testing.T) {
	env := cephtest.Use(t)
	image := createTestImage(t, env, "resv")
	open := func() *imageResvStore {
		b, err := backend.Open("rbd", backend.Options{BlockSize: 512, RBD: backend.RBDOptions{Pool: env["CEPH_POOL"], Image: image,
			Conf: env["CEPH_CONF"], User: env["CEPH_USER"], Keyring: env["CEPH_KEYRING"]}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return &imageResvStore{meta: b.(backend.ImageMetadata), image: image}
	}
	a, b := open(), open()
	for _, s := range []*imageResvStore{a, b} {
		if st, err := s.Load(); err != nil || !resvEqual(st, fabrics.ReservationState{}) {
			t.Fatalf("a new image: %+v, %v", st, err)
		}
	}
	held := fabrics.ReservationState{Generation: 1, Type: nvme.ResvWriteExclusive, Holder: [16]byte{1},
		Registrants: []fabrics.Registrant{{HostID: [16]byte{1}, Key: 0xa1}}}
	if err := a.Store(held); err != nil {
		t.Fatal(err)
	}
	stale := fabrics.ReservationState{Generation: 1, Registrants: []fabrics.Registrant{{HostID: [16]byte{2}, Key: 0xb2}}}
	if err := b.Store(stale); !errors.Is(err, fabrics.ErrReservationChanged) {
		t.Fatalf("the stale store's write: %v, want ErrReservationChanged", err)
	}
	got, err := b.Load()
	if err != nil || !resvEqual(got, held) {
		t.Fatalf("after the refused write: %+v, %v; want %+v", got, err, held)
	}
	got.Generation++
	got.Registrants = append(got.Registrants, fabrics.Registrant{HostID: [16]byte{2}, Key: 0xb2})
	if err := b.Store(got); err != nil {
		t.Fatalf("after reading the new state: %v", err)
	}
	if err := a.Store(held); !errors.Is(err, fabrics.ErrReservationChanged) {
		t.Fatalf("a, stale now: %v", err)
	}
}

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
	env := cephtest.Use(t)
	useFakeRDMA(t)
	image := createTestImage(t, env, "gwresv")
	prefix := "test." + image
	confB := filepath.Dir(env["CEPH_CONF"]) + "/./" + filepath.Base(env["CEPH_CONF"])
	const nqn = "nqn.2026-11.io.example:gw"

	a, err := start(parse(t, gatewayConfig(env, "a", env["CEPH_CONF"], image, prefix, 1)), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.stop(time.Second) })
	waitGroup(t, a, gateway.Owner, 10*time.Second)
	b, err := start(parse(t, gatewayConfig(env, "b", confB, image, prefix, 101)), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.stop(time.Second) })

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
	s := &session{api: newAPI(a, "", a.log)}
	if r, err := s.releaseANAGroup(gatewayParams{Group: 1}); err != nil || !r.Released {
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
	if st, err := (&imageResvStore{meta: b.target.Subsystem(nqn).Namespace(1).Backend.(backend.ImageMetadata)}).Load(); err != nil || st.Type != 0 || len(st.Registrants) != 2 {
		t.Fatalf("stored after the release through b: %+v, %v", st, err)
	}
}
