package fabrics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// resvHost connects a controller of the host with host ID {id} (host NQN
// ending in id) and one I/O queue.
func resvHost(t *testing.T, tg *Target, p *Port, id byte) *host {
	t.Helper()
	hostNQN := fmt.Sprintf("nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000%02x", id)
	data := func(cntlid uint16) []byte {
		b := make([]byte, nvme.ConnectDataSize)
		nvme.ConnectData{HostID: [16]byte{id}, CNTLID: cntlid, SubNQN: testNQN, HostNQN: hostNQN}.Encode(b)
		return b
	}
	h := &host{t: t, admin: NewLoopQueue(tg, p, 0, 32)}
	t.Cleanup(func() {
		if h.io != nil {
			h.io.Close()
		}
		h.admin.Close()
	})
	rsp := h.submit(h.admin, connectCmd(0, 31, 0, false), data(0xffff))
	if rsp.Status() != 0 {
		t.Fatalf("admin connect: %v", rsp.Status())
	}
	h.cntl = uint16(rsp.Result())
	h.setProperty(nvme.RegCC, nvme.CCEnable|6<<nvme.CCIOSQEShift|4<<nvme.CCIOCQEShift)
	h.io = NewLoopQueue(tg, p, 1, 128)
	if rsp := h.submit(h.io, connectCmd(1, 127, 0, true), data(h.cntl)); rsp.Status() != 0 {
		t.Fatalf("io connect: %v", rsp.Status())
	}
	return h
}

func resvCmd(op uint8, action uint8, iekey bool, rtype, cptpl uint8, n int) nvme.Command {
	c := keyed(newCmd(op), n)
	c.SetNSID(1)
	c.SetResv(action, iekey, rtype, cptpl)
	return c
}

func (h *host) resvRegister(action uint8, iekey bool, cptpl uint8, crkey, nrkey uint64) nvme.Status {
	b := make([]byte, nvme.ResvRegisterSize)
	nvme.ResvKeys{Current: crkey, Other: nrkey}.Encode(b)
	return h.submit(h.io, resvCmd(nvme.IOResvRegister, action, iekey, 0, cptpl, len(b)), b).Status()
}

func (h *host) resvAcquire(action, rtype uint8, crkey, prkey uint64) nvme.Status {
	b := make([]byte, nvme.ResvAcquireSize)
	nvme.ResvKeys{Current: crkey, Other: prkey}.Encode(b)
	return h.submit(h.io, resvCmd(nvme.IOResvAcquire, action, false, rtype, 0, len(b)), b).Status()
}

func (h *host) resvRelease(action, rtype uint8, crkey uint64) nvme.Status {
	b := make([]byte, nvme.ResvReleaseSize)
	nvme.ResvKeys{Current: crkey}.Encode(b)
	return h.submit(h.io, resvCmd(nvme.IOResvRelease, action, false, rtype, 0, len(b)), b).Status()
}

// resvReport reads the extended Reservation Status with a buffer of n bytes.
func (h *host) resvReport(n int, eds bool) (nvme.ResvStatus, nvme.Status) {
	c := keyed(newCmd(nvme.IOResvReport), n)
	c.SetNSID(1)
	c.SetCDW(10, uint32(n/4-1))
	if eds {
		c.SetCDW(11, 1)
	}
	b := make([]byte, n)
	st := h.submit(h.io, c, b).Status()
	if st != 0 {
		return nvme.ResvStatus{}, st
	}
	s, _, err := nvme.ParseResvStatus(b, true)
	if err != nil {
		h.t.Fatal(err)
	}
	return s, 0
}

func must(t *testing.T, what string, st nvme.Status) {
	t.Helper()
	if st != 0 {
		t.Fatalf("%s: %v", what, st)
	}
}

func wantStatus(t *testing.T, what string, got, want nvme.Status) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: status %v, want %v", what, got, want)
	}
}

const conflict = nvme.StatusReservationConflict | nvme.DNR

// ioByClass issues one command of each kind the access rules cover.
func ioCommandsForAccess(h *host) map[string]nvme.Status {
	blk := make([]byte, 512)
	dsm := make([]byte, nvme.DSMRangeSize)
	nvme.DSMRange(dsm).Set(8, 1)
	c := keyed(newCmd(nvme.IODatasetMgmt), len(dsm))
	c.SetNSID(1)
	c.SetCDW(11, nvme.DSMAttrDeallocate)
	wz := newCmd(nvme.IOWriteZeroes)
	wz.SetNSID(1)
	fl := flushCmd(1)
	return map[string]nvme.Status{
		"read":         h.rw(nvme.IORead, 1, 0, 1, blk, false),
		"compare":      h.rw(nvme.IOCompare, 1, 0, 1, blk, false),
		"write":        h.rw(nvme.IOWrite, 1, 0, 1, blk, false),
		"write zeroes": h.submit(h.io, wz, nil).Status(),
		"dsm":          h.submit(h.io, c, dsm).Status(),
		"flush":        h.submit(h.io, fl, nil).Status(),
	}
}

// zeroingMem is memBackend with Write Zeroes.
type zeroingMem struct{ *memBackend }

func (z zeroingMem) WriteZeroes(off, n int64) error { return z.Discard(off, n) }

// TestResvAccessTable checks every type against the holder, a registrant
// and a host that is not registered, for every command class: the
// specification's table written out, not derived from the code's.
func TestResvAccessTable(t *testing.T) {
	reads := []string{"read", "compare"}
	// conflicting[type][role] lists the classes refused: "r" reads, "w" writes.
	conflicting := map[uint8]map[string]string{
		nvme.ResvWriteExclusive:         {"holder": "", "registrant": "w", "none": "w"},
		nvme.ResvExclusiveAccess:        {"holder": "", "registrant": "rw", "none": "rw"},
		nvme.ResvWriteExclusiveRegOnly:  {"holder": "", "registrant": "", "none": "w"},
		nvme.ResvExclusiveAccessRegOnly: {"holder": "", "registrant": "", "none": "rw"},
		nvme.ResvWriteExclusiveAllRegs:  {"holder": "", "registrant": "", "none": "w"},
		nvme.ResvExclusiveAccessAllRegs: {"holder": "", "registrant": "", "none": "rw"},
	}
	for rtype := uint8(1); rtype <= 6; rtype++ {
		t.Run(fmt.Sprint("type", rtype), func(t *testing.T) {
			tg, p := targetWith(t, zeroingMem{newMem(1<<20, 512)})
			hosts := map[string]*host{"holder": resvHost(t, tg, p, 1), "registrant": resvHost(t, tg, p, 2), "none": resvHost(t, tg, p, 3)}
			must(t, "register holder", hosts["holder"].resvRegister(nvme.ResvRegister, false, 0, 0, 0xa))
			must(t, "register other", hosts["registrant"].resvRegister(nvme.ResvRegister, false, 0, 0, 0xb))
			must(t, "acquire", hosts["holder"].resvAcquire(nvme.ResvAcquire, rtype, 0xa, 0))
			for role, h := range hosts {
				for cmd, st := range ioCommandsForAccess(h) {
					class := "w"
					if slices.Contains(reads, cmd) {
						class = "r"
					}
					want := nvme.Status(0)
					for _, c := range conflicting[rtype][role] {
						if string(c) == class {
							want = conflict
						}
					}
					if st != want {
						t.Errorf("type %d, %s's %s: %v, want %v", rtype, role, cmd, st, want)
					}
				}
			}
		})
	}
}

// A second controller of the holding host (same host ID) shares the
// reservation; a fused Compare and Write of another host fails on the
// write.
func TestResvSharedByHostAndFused(t *testing.T) {
	tg, p, _ := testTarget(t)
	a1, a2, b := resvHost(t, tg, p, 1), resvHost(t, tg, p, 1), resvHost(t, tg, p, 2)
	must(t, "register", a1.resvRegister(nvme.ResvRegister, false, 0, 0, 1))
	wantStatus(t, "second controller registers the same host again with another key",
		a2.resvRegister(nvme.ResvRegister, false, 0, 0, 2), conflict)
	must(t, "acquire from the second controller", a2.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 1, 0))
	blk := make([]byte, 512)
	must(t, "write from the first controller", a1.rw(nvme.IOWrite, 1, 0, 1, blk, false))
	_, second := fused(b, 0, blk, blk)
	wantStatus(t, "other host's fused write", second, conflict)
	first, second := fused(a1, 0, blk, blk)
	if first != 0 || second != 0 {
		t.Fatalf("holder's fused pair: %v %v", first, second)
	}
}

func TestResvRegisterActions(t *testing.T) {
	tg, p, _ := testTarget(t)
	a, b := resvHost(t, tg, p, 1), resvHost(t, tg, p, 2)
	gen := func() uint32 { s, _ := a.resvReport(4096, true); return s.Gen }
	must(t, "register", a.resvRegister(nvme.ResvRegister, false, 0, 0, 0x11))
	must(t, "register again, same key", a.resvRegister(nvme.ResvRegister, false, 0, 0, 0x11))
	wantStatus(t, "register again, other key", a.resvRegister(nvme.ResvRegister, false, 0, 0, 0x12), conflict)
	if g := gen(); g != 2 {
		t.Fatalf("generation %d after two successful registers, want 2", g)
	}
	wantStatus(t, "replace with a wrong key", a.resvRegister(nvme.ResvReplace, false, 0, 0x99, 0x22), conflict)
	must(t, "replace", a.resvRegister(nvme.ResvReplace, false, 0, 0x11, 0x22))
	must(t, "replace ignoring the key", a.resvRegister(nvme.ResvReplace, true, 0, 0x99, 0x33))
	wantStatus(t, "replace by an unregistered host", b.resvRegister(nvme.ResvReplace, false, 0, 0, 0x44), conflict)
	must(t, "replace ignoring the key registers", b.resvRegister(nvme.ResvReplace, true, 0, 0, 0x44))
	s, _ := a.resvReport(4096, true)
	if len(s.Registrants) != 2 || s.Registrants[0].Key != 0x33 || s.Registrants[1].Key != 0x44 ||
		s.Registrants[1].HostID != [16]byte{2} || s.Registrants[0].CNTLID != nvme.ResvDynamicCNTLID {
		t.Fatalf("registrants %+v", s.Registrants)
	}
	wantStatus(t, "unregister with a wrong key", b.resvRegister(nvme.ResvUnregister, false, 0, 0x1, 0), conflict)
	must(t, "unregister", b.resvRegister(nvme.ResvUnregister, false, 0, 0x44, 0))
	wantStatus(t, "unregister again", b.resvRegister(nvme.ResvUnregister, true, 0, 0, 0), conflict)
	wantStatus(t, "action 3", a.resvRegister(3, false, 0, 0x33, 1), nvme.StatusInvalidField|nvme.DNR)
	wantStatus(t, "CPTPL 1", a.resvRegister(nvme.ResvReplace, false, 1, 0x33, 1), nvme.StatusInvalidField|nvme.DNR)
	wantStatus(t, "CPTPL set without a store", a.resvRegister(nvme.ResvReplace, false, nvme.CPTPLSet, 0x33, 1), nvme.StatusInvalidField|nvme.DNR)
	if g := gen(); g != 6 {
		t.Fatalf("generation %d, want 6", g)
	}
}

func TestResvAcquireRelease(t *testing.T) {
	tg, p, _ := testTarget(t)
	a, b := resvHost(t, tg, p, 1), resvHost(t, tg, p, 2)
	wantStatus(t, "acquire unregistered", a.resvAcquire(nvme.ResvAcquire, 1, 0, 0), conflict)
	must(t, "register a", a.resvRegister(nvme.ResvRegister, false, 0, 0, 1))
	must(t, "register b", b.resvRegister(nvme.ResvRegister, false, 0, 0, 2))
	wantStatus(t, "acquire with a wrong key", a.resvAcquire(nvme.ResvAcquire, 1, 9, 0), conflict)
	wantStatus(t, "acquire type 7", a.resvAcquire(nvme.ResvAcquire, 7, 1, 0), nvme.StatusInvalidField|nvme.DNR)
	must(t, "acquire", a.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusiveRegOnly, 1, 0))
	must(t, "acquire again, same type", a.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusiveRegOnly, 1, 0))
	wantStatus(t, "acquire again, other type", a.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 1, 0), conflict)
	wantStatus(t, "acquire held by another", b.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusiveRegOnly, 2, 0), conflict)
	must(t, "release by a registrant that does not hold", b.resvRelease(nvme.ResvRelease, nvme.ResvWriteExclusiveRegOnly, 2))
	wantStatus(t, "release with the wrong type", a.resvRelease(nvme.ResvRelease, nvme.ResvWriteExclusive, 1), nvme.StatusInvalidField|nvme.DNR)
	wantStatus(t, "release with a wrong key", a.resvRelease(nvme.ResvRelease, nvme.ResvWriteExclusiveRegOnly, 3), conflict)
	s, _ := a.resvReport(4096, true)
	if s.Type != nvme.ResvWriteExclusiveRegOnly || !s.Registrants[0].Holds || s.Registrants[1].Holds {
		t.Fatalf("before release: %+v", s)
	}
	must(t, "release", a.resvRelease(nvme.ResvRelease, nvme.ResvWriteExclusiveRegOnly, 1))
	if s, _ := a.resvReport(4096, true); s.Type != 0 || len(s.Registrants) != 2 {
		t.Fatalf("after release: %+v", s)
	}
	// b is told the registrants-only reservation was released.
	if n := b.readResvLog(); n.Type != nvme.ResvNoticeReleased || n.NSID != 1 {
		t.Fatalf("b's notification %+v", n)
	}
	if n := a.readResvLog(); n.Count != 0 {
		t.Fatalf("the releasing host got %+v", n)
	}
	must(t, "acquire all registrants", b.resvAcquire(nvme.ResvAcquire, nvme.ResvExclusiveAccessAllRegs, 2, 0))
	must(t, "another registrant acquires the same all-registrants type", a.resvAcquire(nvme.ResvAcquire, nvme.ResvExclusiveAccessAllRegs, 1, 0))
	s, _ = a.resvReport(4096, true)
	if !s.Registrants[0].Holds || !s.Registrants[1].Holds {
		t.Fatalf("all registrants hold: %+v", s)
	}
	must(t, "clear", a.resvRelease(nvme.ResvClear, 0, 1))
	if s, _ := a.resvReport(4096, true); s.Type != 0 || len(s.Registrants) != 0 || s.Gen != 3 {
		t.Fatalf("after clear: %+v", s)
	}
	if n := b.readResvLog(); n.Type != nvme.ResvNoticeResvPreempted {
		t.Fatalf("b's notification after clear %+v", n)
	}
	wantStatus(t, "release action 2", a.resvRelease(2, 0, 1), conflict) // a is no longer registered
}

func TestResvReport(t *testing.T) {
	tg, p, _ := testTarget(t)
	a := resvHost(t, tg, p, 1)
	must(t, "register", a.resvRegister(nvme.ResvRegister, false, 0, 0, 5))
	if _, st := a.resvReport(4096, false); st != nvme.StatusHostIDInconsistent|nvme.DNR {
		t.Fatalf("report without EDS: %v, want Host Identifier Inconsistent Format", st)
	}
	// NUMD covering the header only: REGCTL still counts the registrant.
	s, st := a.resvReport(nvme.ResvStatusExtHdrSize, true)
	if st != 0 || s.Gen != 1 || len(s.Registrants) != 0 {
		t.Fatalf("header-only report: %+v %v", s, st)
	}
	c := keyed(newCmd(nvme.IOResvReport), 8)
	c.SetNSID(1)
	c.SetCDW(10, 1)
	c.SetCDW(11, 1)
	b := make([]byte, 8)
	must(t, "8-byte report", a.submit(a.io, c, b).Status())
	if binary.LittleEndian.Uint32(b) != 1 || b[4] != 0 || b[5] != 1 {
		t.Fatalf("8-byte report % x", b)
	}
}

// TestResvPreemptCases runs every row of the preempt table on the
// engine: A holds (or not) with key 0xa, B has key 0xb, C has key 0xc.
func TestResvPreemptCases(t *testing.T) {
	A, B, C := [16]byte{0xa}, [16]byte{0xb}, [16]byte{0xc}
	regs := func() []Registrant { return []Registrant{{A, 0xa}, {B, 0xb}, {C, 0xc}} }
	cases := []preemptCase{
		{"no reservation: PRKEY's registrants go", 0, A, 0xa, 1, 0xb,
			preemptWant{0, 0, [16]byte{}, [][16]byte{A, C}, map[[16]byte]uint8{B: nvme.ResvNoticeRegPreempted}, nil}},
		{"no reservation: unknown PRKEY", 0, A, 0xa, 1, 0x99, preemptWant{st: conflict}},
		{"all registrants, PRKEY 0: preemptor holds the new type alone", nvme.ResvWriteExclusiveAllRegs, B, 0xb, nvme.ResvExclusiveAccess, 0,
			preemptWant{0, nvme.ResvExclusiveAccess, B, [][16]byte{B},
				map[[16]byte]uint8{A: nvme.ResvNoticeRegPreempted, C: nvme.ResvNoticeRegPreempted}, nil}},
		{"all registrants, PRKEY of one", nvme.ResvExclusiveAccessAllRegs, B, 0xb, 1, 0xc,
			preemptWant{0, nvme.ResvExclusiveAccessAllRegs, [16]byte{}, [][16]byte{A, B}, map[[16]byte]uint8{C: nvme.ResvNoticeRegPreempted}, nil}},
		{"all registrants, unknown PRKEY", nvme.ResvExclusiveAccessAllRegs, B, 0xb, 1, 0x99, preemptWant{st: conflict}},
		{"holder preempts itself: type changes", nvme.ResvWriteExclusiveRegOnly, A, 0xa, nvme.ResvExclusiveAccess, 0xa,
			preemptWant{0, nvme.ResvExclusiveAccess, A, [][16]byte{A, B, C},
				map[[16]byte]uint8{B: nvme.ResvNoticeReleased, C: nvme.ResvNoticeReleased}, nil}},
		{"PRKEY of the holder: the preemptor holds, the holder goes", nvme.ResvWriteExclusive, B, 0xb, nvme.ResvExclusiveAccess, 0xa,
			preemptWant{0, nvme.ResvExclusiveAccess, B, [][16]byte{B, C},
				map[[16]byte]uint8{A: nvme.ResvNoticeRegPreempted, C: nvme.ResvNoticeReleased}, nil}},
		{"PRKEY of the holder, same type: no release notice", nvme.ResvWriteExclusive, B, 0xb, nvme.ResvWriteExclusive, 0xa,
			preemptWant{0, nvme.ResvWriteExclusive, B, [][16]byte{B, C}, map[[16]byte]uint8{A: nvme.ResvNoticeRegPreempted}, nil}},
		{"PRKEY of a non-holder: it goes, the reservation stays", nvme.ResvWriteExclusive, B, 0xb, nvme.ResvExclusiveAccess, 0xc,
			preemptWant{0, nvme.ResvWriteExclusive, A, [][16]byte{A, B}, map[[16]byte]uint8{C: nvme.ResvNoticeRegPreempted}, nil}},
		{"PRKEY 0, held by another: invalid", nvme.ResvWriteExclusive, B, 0xb, 1, 0, preemptWant{st: nvme.StatusInvalidField | nvme.DNR}},
		{"wrong CRKEY", nvme.ResvWriteExclusive, B, 0x77, 1, 0xa, preemptWant{st: conflict}},
		{"unregistered preemptor", nvme.ResvWriteExclusive, [16]byte{0xd}, 0xd, 1, 0xa, preemptWant{st: conflict}},
	}
	runPreemptCases(t, regs(), cases)
}

func (h *host) readResvLog() nvme.ResvNotice {
	h.t.Helper()
	b, st := h.getLog(nvme.LogReservation, nvme.ResvLogSize, 0)
	if st != 0 {
		h.t.Fatalf("reservation log: %v", st)
	}
	n, err := nvme.ParseResvNotice(b)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *host) setFeature(fid uint8, nsid, v uint32) nvme.Status {
	c := newCmd(nvme.AdminSetFeatures)
	c.SetNSID(nsid)
	c.SetCDW(10, uint32(fid))
	c.SetCDW(11, v)
	return h.submit(h.admin, c, nil).Status()
}

func (h *host) getFeature(fid uint8, nsid uint32) (uint64, nvme.Status) {
	c := newCmd(nvme.AdminGetFeatures)
	c.SetNSID(nsid)
	c.SetCDW(10, uint32(fid))
	rsp := h.submit(h.admin, c, nil)
	return rsp.Result(), rsp.Status()
}

// The notification mask is per controller: of two controllers of the
// preempted host, only the one that did not mask the type gets the page,
// and its event.
func TestResvNotificationMask(t *testing.T) {
	tg, p, _ := testTarget(t)
	a, b1, b2 := resvHost(t, tg, p, 1), resvHost(t, tg, p, 2), resvHost(t, tg, p, 2)
	must(t, "mask", b1.setFeature(nvme.FeatResvMask, 1, nvme.ResvMaskRegPreempted))
	if v, st := b1.getFeature(nvme.FeatResvMask, 1); st != 0 || v != nvme.ResvMaskRegPreempted {
		t.Fatalf("mask reads %#x %v", v, st)
	}
	if v, _ := b2.getFeature(nvme.FeatResvMask, 1); v != 0 {
		t.Fatalf("the other controller's mask %#x", v)
	}
	aer := b2.admin.SubmitAsync(newCmd(nvme.AdminAsyncEvent), nil)
	must(t, "register a", a.resvRegister(nvme.ResvRegister, false, 0, 0, 1))
	must(t, "register b", b1.resvRegister(nvme.ResvRegister, false, 0, 0, 2))
	must(t, "acquire", b1.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 2, 0))
	must(t, "preempt", a.resvAcquire(nvme.ResvPreempt, nvme.ResvWriteExclusive, 1, 2))
	ev := <-aer
	if want := nvme.AsyncEventResult(nvme.AsyncTypeIOCommandSet, nvme.AsyncIOResvLogAvailable, nvme.LogReservation); uint32(ev.Result()) != want {
		t.Fatalf("event %#x, want %#x", ev.Result(), want)
	}
	if n := b2.readResvLog(); n.Type != nvme.ResvNoticeRegPreempted || n.Count != 1 || n.NSID != 1 || n.Available != 0 {
		t.Fatalf("unmasked controller's page %+v", n)
	}
	if n := b1.readResvLog(); n.Count != 0 {
		t.Fatalf("masked controller's page %+v", n)
	}
	if n := b2.readResvLog(); n.Count != 0 {
		t.Fatalf("page read twice: %+v", n)
	}
	wantStatus(t, "mask of a missing namespace", a.setFeature(nvme.FeatResvMask, 9, 2), nvme.StatusInvalidNamespace|nvme.DNR)
	// nvme-cli's get-feature walk (NSID 0) goes on past a plain Invalid Field only.
	if _, st := a.getFeature(nvme.FeatResvMask, 0); st != nvme.StatusInvalidField {
		t.Fatalf("get mask without a namespace: %v, want Invalid Field without DNR", st)
	}
	if _, st := a.getFeature(nvme.FeatResvPersist, 0); st != nvme.StatusInvalidField {
		t.Fatalf("get persistence without a namespace: %v, want Invalid Field without DNR", st)
	}
	must(t, "mask every namespace", a.setFeature(nvme.FeatResvMask, nvme.NSIDBroadcast, nvme.ResvMaskAll))
	if v, _ := a.getFeature(nvme.FeatResvMask, 1); v != nvme.ResvMaskAll {
		t.Fatalf("broadcast mask reads %#x on namespace 1", v)
	}
}

// More notifications than the log holds: the oldest 64 wait, the rest are
// lost, and the last page read carries their count, so that the host
// sees the gap; Available counts the pages still queued.
func TestResvLogOverflow(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := resvHost(t, tg, p, 1)
	c := h.ctrl()
	for range resvLogMax + 3 {
		c.resvNotice(1, nvme.ResvNoticeReleased)
	}
	for i := 1; i <= resvLogMax; i++ {
		n := h.readResvLog()
		want := uint64(i)
		if i == resvLogMax {
			want += 3
		}
		if n.Count != want || int(n.Available) != resvLogMax-i || n.Type != nvme.ResvNoticeReleased {
			t.Fatalf("page %d: %+v, want count %d available %d", i, n, want, resvLogMax-i)
		}
	}
	if n := h.readResvLog(); n.Count != 0 {
		t.Fatalf("empty log reads %+v", n)
	}
	c.resvNotice(1, nvme.ResvNoticeReleased)
	if n := h.readResvLog(); n.Count != resvLogMax+4 {
		t.Fatalf("next page's count %d, want %d", n.Count, resvLogMax+4)
	}
	// The count wraps to 1, never 0 (the empty page).
	c.mu.Lock()
	c.resv.count = ^uint64(0)
	c.mu.Unlock()
	c.resvNotice(1, nvme.ResvNoticeReleased)
	if n := h.readResvLog(); n.Count != 1 {
		t.Fatalf("count after wrapping %d", n.Count)
	}
}

func TestResvHostIDFeature(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := resvHost(t, tg, p, 7)
	wantStatus(t, "set host identifier", h.setFeature(nvme.FeatHostID, 0, 0), nvme.StatusCommandSequence|nvme.DNR)
	c := keyed(newCmd(nvme.AdminGetFeatures), nvme.HostIDExtSize)
	c.SetCDW(10, nvme.FeatHostID)
	c.SetCDW(11, nvme.FeatHostIDExtended)
	b := make([]byte, nvme.HostIDExtSize)
	must(t, "get host identifier", h.submit(h.admin, c, b).Status())
	if b[0] != 7 {
		t.Fatalf("host identifier % x", b)
	}
}

func TestResvDisabled(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := resvHost(t, tg, p, 1)
	must(t, "register", h.resvRegister(nvme.ResvRegister, false, 0, 0, 1))
	must(t, "acquire", h.resvAcquire(nvme.ResvAcquire, nvme.ResvExclusiveAccess, 1, 0))
	other := resvHost(t, tg, p, 2)
	blk := make([]byte, 512)
	wantStatus(t, "read under exclusive access", other.rw(nvme.IORead, 1, 0, 1, blk, false), conflict)
	ns := tg.Subsystem(testNQN).Namespace(1)
	ns.SetReservations(false)
	wantStatus(t, "register with reservations off", h.resvRegister(nvme.ResvRegister, false, 0, 0, 1), nvme.StatusInvalidOpcode|nvme.DNR)
	must(t, "read with reservations off", other.rw(nvme.IORead, 1, 0, 1, blk, false))
	id, _ := h.identify(nvme.CNSNamespace, 1)
	if id[31] != 0 {
		t.Fatalf("RESCAP %#x with reservations off", id[31])
	}
	ns.SetReservations(true)
	id, _ = h.identify(nvme.CNSNamespace, 1)
	ctrl, _ := h.identify(nvme.CNSController, 0)
	if id[31] != nvme.RESCAPTypes|nvme.RESCAPIEKEY || le16(ctrl, 520)&nvme.ONCSReservations == 0 || le32(ctrl, 96)&nvme.CTRATTHostID128 == 0 {
		t.Fatalf("RESCAP %#x ONCS %#x CTRATT %#x", id[31], le16(ctrl, 520), le32(ctrl, 96))
	}
}

// memStore is a ReservationStore in memory, as a restart sees it.
type memStore struct {
	mu    sync.Mutex
	state ReservationState
	fail  error
	n     int
}

func (m *memStore) Load() (ReservationState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.state
	s.Registrants = slices.Clone(s.Registrants)
	return s, nil
}

func (m *memStore) Store(s ReservationState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.n++
	m.state = s
	m.state.Registrants = slices.Clone(s.Registrants)
	return nil
}

// restart builds a new target whose namespace reads the store.
func restartWith(t *testing.T, st ReservationStore) (*Target, *Port) {
	tg, p := targetWith(t, newMem(1<<20, 512))
	ns := tg.Subsystem(testNQN).Namespace(1)
	if err := ns.SetReservationStore(st); err != nil {
		t.Fatal(err)
	}
	return tg, p
}

func TestResvPersistence(t *testing.T) {
	st := &memStore{}
	tg, p := restartWith(t, st)
	a, b := resvHost(t, tg, p, 1), resvHost(t, tg, p, 2)
	must(t, "register without PTPL", a.resvRegister(nvme.ResvRegister, false, 0, 0, 1))
	if st.n != 0 {
		t.Fatalf("stored %d times without PTPL", st.n)
	}
	must(t, "register b with CPTPL set", b.resvRegister(nvme.ResvRegister, false, nvme.CPTPLSet, 0, 2))
	must(t, "acquire", b.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 2, 0))
	if v, _ := a.getFeature(nvme.FeatResvPersist, 1); v != nvme.ResvPTPL {
		t.Fatalf("PTPL feature reads %d", v)
	}
	id, _ := a.identify(nvme.CNSNamespace, 1)
	if id[31]&nvme.RESCAPPersist == 0 {
		t.Fatalf("RESCAP %#x without PTPL", id[31])
	}
	// A failed store fails the command and changes nothing.
	st.fail = errors.New("disk gone")
	wantStatus(t, "release with a failing store", b.resvRelease(nvme.ResvRelease, nvme.ResvWriteExclusive, 2), nvme.StatusInternal)
	st.fail = nil
	s, _ := a.resvReport(4096, true)
	if s.Type != nvme.ResvWriteExclusive {
		t.Fatalf("state changed by a failed store: %+v", s)
	}

	tg2, p2 := restartWith(t, st)
	a2 := resvHost(t, tg2, p2, 1)
	s2, _ := a2.resvReport(4096, true)
	if s2.Gen != s.Gen || s2.Type != nvme.ResvWriteExclusive || !s2.PTPL || len(s2.Registrants) != 2 ||
		!s2.Registrants[1].Holds || s2.Registrants[1].Key != 2 {
		t.Fatalf("after restart %+v, before %+v", s2, s)
	}
	blk := make([]byte, 512)
	wantStatus(t, "a's write after restart", a2.rw(nvme.IOWrite, 1, 0, 1, blk, false), conflict)

	// PTPL cleared through the feature: the next restart starts empty.
	must(t, "clear PTPL", a2.setFeature(nvme.FeatResvPersist, 1, 0))
	tg3, p3 := restartWith(t, st)
	a3 := resvHost(t, tg3, p3, 1)
	if s3, _ := a3.resvReport(4096, true); s3.Type != 0 || len(s3.Registrants) != 0 {
		t.Fatalf("restored without PTPL: %+v", s3)
	}
}

// gatedWrites blocks writes until released, to hold a command in the backend.
type gatedWrites struct {
	*memBackend
	entered chan struct{}
	release chan struct{}
}

func newGatedWrites() *gatedWrites {
	return &gatedWrites{memBackend: newMem(1<<20, 512), entered: make(chan struct{}, 1), release: make(chan struct{})}
}

// writeHeldUnderB registers a (key 1) and b (key 2), has b take a Write
// Exclusive reservation, and returns once b's write (CID 100) is held in g.
func writeHeldUnderB(t *testing.T, a, b *host, g *gatedWrites) <-chan nvme.Completion {
	t.Helper()
	must(t, "register a", a.resvRegister(nvme.ResvRegister, false, 0, 0, 1))
	must(t, "register b", b.resvRegister(nvme.ResvRegister, false, 0, 0, 2))
	must(t, "acquire b", b.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 2, 0))
	w := keyed(newCmd(nvme.IOWrite), 512)
	w.SetNSID(1)
	w.SetCID(100)
	inflight := b.io.SubmitAsync(w, make([]byte, 512))
	<-g.entered
	return inflight
}

func (g *gatedWrites) WriteAt(p []byte, off int64) error {
	g.entered <- struct{}{}
	<-g.release
	return g.memBackend.WriteAt(p, off)
}

// Preempt and Abort: the preempted host's write already in the backend
// finishes before the preempt completes, and completes with Command
// Aborted due to Preempt and Abort; its next write meets the conflict.
func TestResvPreemptAndAbortFences(t *testing.T) {
	g := newGatedWrites()
	tg, p := targetWith(t, g)
	a, b := resvHost(t, tg, p, 1), resvHost(t, tg, p, 2)
	var once sync.Once
	open := func() { once.Do(func() { close(g.release) }) }
	t.Cleanup(open) // a failure must not leave the write in the backend: Close waits for it
	inflight := writeHeldUnderB(t, a, b, g)

	acq := make([]byte, nvme.ResvAcquireSize)
	nvme.ResvKeys{Current: 1, Other: 2}.Encode(acq)
	pc := resvCmd(nvme.IOResvAcquire, nvme.ResvPreemptAndAbort, false, nvme.ResvWriteExclusive, 0, len(acq))
	pc.SetCID(200)
	preempt := a.io.SubmitAsync(pc, acq)
	ns := tg.Subsystem(testNQN).Namespace(1)
	published := make(chan struct{})
	go func() {
		// The fencing state is visible to I/O before the fence waits.
		for s := ns.resv.snap.Load(); s == nil || s.pending == nil; s = ns.resv.snap.Load() {
		}
		close(published)
	}()
	<-published
	select {
	case rsp := <-preempt:
		t.Fatalf("preempt and abort completed (%v) while the preempted host's write was in the backend", rsp.Status())
	default:
	}
	open()
	if rsp := <-inflight; rsp.Status() != nvme.StatusPreemptAborted|nvme.DNR {
		t.Fatalf("fenced write completed with %v, want Command Aborted due to Preempt and Abort", rsp.Status())
	}
	if rsp := <-preempt; rsp.Status() != 0 {
		t.Fatalf("preempt and abort: %v", rsp.Status())
	}
	blk := make([]byte, 512)
	wantStatus(t, "fenced host's next write", b.rw(nvme.IOWrite, 1, 0, 1, blk, false), conflict)
	must(t, "fenced host's read under write exclusive", b.rw(nvme.IORead, 1, 0, 1, blk, false))
	if n := b.readResvLog(); n.Type != nvme.ResvNoticeRegPreempted {
		t.Fatalf("b's notification %+v", n)
	}
	// Registering again ends the fencing of its commands.
	must(t, "register b again", b.resvRegister(nvme.ResvRegister, false, 0, 0, 3))
	if s := ns.resv.snap.Load(); slices.Contains(s.aborted, [16]byte{2}) {
		t.Fatalf("b still fenced after registering again: %v", s.aborted)
	}
}

// A fenced command that does not leave its backend in time: the Preempt
// and Abort completes with Command Interrupted, and the state is as it was
// (the caller did not become the holder): the host retries.
func TestResvPreemptAndAbortTimeout(t *testing.T) {
	g := newGatedWrites()
	tg, p := targetWith(t, g)
	a, b := resvHost(t, tg, p, 1), resvHost(t, tg, p, 2)
	t.Cleanup(func() { close(g.release) })
	old := fenceTimeout
	fenceTimeout = 20 * time.Millisecond
	t.Cleanup(func() { fenceTimeout = old })
	writeHeldUnderB(t, a, b, g)
	wantStatus(t, "preempt and abort with the write stuck", a.resvAcquire(nvme.ResvPreemptAndAbort, nvme.ResvWriteExclusive, 1, 2),
		nvme.StatusCommandInterrupted)
	if s := tg.Subsystem(testNQN).Namespace(1).Reservation(); s.Holder != [16]byte{2} || len(s.Registrants) != 2 {
		t.Fatalf("state after the interrupted preempt %+v, want b holding, both registered", s)
	}
	blk := make([]byte, 512)
	wantStatus(t, "a's write after the interrupted preempt", a.rw(nvme.IOWrite, 1, 0, 1, blk, false), conflict)
}
