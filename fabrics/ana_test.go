package fabrics

import (
	"bytes"
	"net/netip"
	"reflect"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// anaLogCmd reads n bytes of the ANA log at off, with RGO and RAE as given.
func (h *host) anaLog(n int, off uint64, rgo, rae bool) ([]byte, nvme.Status) {
	h.t.Helper()
	c := keyed(newCmd(nvme.AdminGetLogPage), n)
	cdw10 := uint32(nvme.LogANA) | uint32(n/4-1)<<16
	if rgo {
		cdw10 |= nvme.ANALogRGO << 8
	}
	if rae {
		cdw10 |= 1 << 15
	}
	c.SetCDW(10, cdw10)
	c.SetCDW(12, uint32(off))
	c.SetCDW(13, uint32(off>>32))
	b := make([]byte, n)
	return b, h.submit(h.admin, c, b).Status()
}

// readANALog reads and decodes the whole ANA log, as the Linux host does
// at connect: a buffer sized for every group and namespace.
func (h *host) readANALog() nvme.ANALog {
	h.t.Helper()
	size := nvme.ANALogHdrSize + nvme.MaxANAGroups*nvme.ANAGroupSize + nvme.MaxNamespaces*nvme.ANANSIDSize
	b, st := h.anaLog(size, 0, false, false)
	if st != 0 {
		h.t.Fatalf("ANA log: %v", st)
	}
	l, err := nvme.ParseANALog(b)
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}

// anaTarget is the test target with namespaces 1 and 3 in group 1 and
// namespace 2 in group 5.
func anaTarget(t *testing.T) (*Target, *Port) {
	t.Helper()
	tg, p, _ := testTarget(t)
	s := tg.Subsystem(testNQN)
	for _, id := range []uint32{2, 3} {
		ns, err := NewNamespace(id, newMem(1<<20, 512), false, [16]byte{byte(id)})
		if err != nil {
			t.Fatal(err)
		}
		if id == 2 {
			if err := ns.SetANAGroup(5); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddNamespace(ns); err != nil {
			t.Fatal(err)
		}
	}
	return tg, p
}

func TestANALogPage(t *testing.T) {
	tg, p := anaTarget(t)
	h := connect(t, tg, p, testNQN)
	before := h.readANALog()
	if err := tg.SetANAStates(p.ID, map[uint32]nvme.ANAState{5: nvme.ANAInaccessible, 9: nvme.ANAChange}); err != nil {
		t.Fatal(err)
	}
	l := h.readANALog()
	chg := before.ChangeCount + 1
	// Group 9 has no namespace: not listed, whatever its state.
	want := nvme.ANALog{ChangeCount: chg, Groups: []nvme.ANAGroup{
		{ID: 1, ChangeCount: chg, State: nvme.ANAOptimized, NSIDs: []uint32{1, 3}},
		{ID: 5, ChangeCount: chg, State: nvme.ANAInaccessible, NSIDs: []uint32{2}},
	}}
	if !reflect.DeepEqual(l, want) {
		t.Fatalf("ANA log %+v, want %+v", l, want)
	}
	// The same states again change nothing.
	if err := tg.SetANAStates(p.ID, map[uint32]nvme.ANAState{5: nvme.ANAInaccessible, 9: nvme.ANAChange}); err != nil {
		t.Fatal(err)
	}
	if l := h.readANALog(); l.ChangeCount != chg {
		t.Fatalf("change count %d after setting the same states, want %d", l.ChangeCount, chg)
	}

	t.Run("return groups only", func(t *testing.T) {
		b, st := h.anaLog(4096, 0, true, false)
		if st != 0 {
			t.Fatal(st)
		}
		l, err := nvme.ParseANALog(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Groups) != 2 || l.Groups[0].ID != 1 || l.Groups[1].ID != 5 || l.Groups[0].NSIDs != nil || l.Groups[1].NSIDs != nil {
			t.Fatalf("RGO log %+v, want groups 1 and 5 without NSIDs", l)
		}
		if !bytes.Equal(b[nvme.ANALogHdrSize+2*nvme.ANAGroupSize:], make([]byte, 4096-nvme.ANALogHdrSize-2*nvme.ANAGroupSize)) {
			t.Fatal("bytes after the last descriptor are not zero")
		}
	})
	t.Run("offsets", func(t *testing.T) {
		whole, _ := h.anaLog(4096, 0, false, false)
		for _, off := range []uint64{8, nvme.ANALogHdrSize, nvme.ANALogHdrSize + nvme.ANAGroupSize + 4} {
			part, st := h.anaLog(32, off, false, false)
			if st != 0 || !bytes.Equal(part, whole[off:off+32]) {
				t.Fatalf("32 bytes at %d: %x (%v), want %x", off, part, st, whole[off:off+32])
			}
		}
		// The page is as long as its largest possible size (8208 bytes), as
		// the hosts size it: libnvme reads it in 4 KiB pieces.
		if tail, st := h.anaLog(4096, 8192, false, false); st != 0 || !bytes.Equal(tail, make([]byte, 4096)) {
			t.Fatalf("4 KiB at 8192: %v, want success and zeros", st)
		}
		if _, st := h.anaLog(4, anaLogSize+4, false, false); st != nvme.StatusInvalidField|nvme.DNR {
			t.Fatalf("offset past the page: %v", st)
		}
		if _, st := h.anaLog(4, 2, false, false); st != nvme.StatusInvalidField|nvme.DNR {
			t.Fatalf("offset not a multiple of 4: %v", st)
		}
	})
	t.Run("namespace moved", func(t *testing.T) {
		if err := tg.Subsystem(testNQN).SetANAGroup(3, 5); err != nil {
			t.Fatal(err)
		}
		l := h.readANALog()
		if l.ChangeCount != chg+1 || len(l.Groups) != 2 || !reflect.DeepEqual(l.Groups[1].NSIDs, []uint32{2, 3}) ||
			!reflect.DeepEqual(l.Groups[0].NSIDs, []uint32{1}) {
			t.Fatalf("after moving namespace 3 to group 5: %+v", l)
		}
		id, _ := h.identify(nvme.CNSNamespace, 3)
		if g := le32(id, 92); g != 5 {
			t.Fatalf("Identify Namespace ANAGRPID %d, want 5", g)
		}
		if err := tg.Subsystem(testNQN).SetANAGroup(3, nvme.MaxANAGroups+1); err == nil {
			t.Fatal("group 129 accepted")
		}
	})
}

// Every command that needs a namespace fails with the state's path
// related status, DNR clear, while admin commands keep working.
func TestANAStateIOStatus(t *testing.T) {
	tg, p := anaTarget(t)
	h := connect(t, tg, p, testNQN)
	buf := make([]byte, 4096)
	ops := []struct {
		name string
		run  func() nvme.Status
	}{
		{"read", func() nvme.Status { return h.rw(nvme.IORead, 2, 0, 8, buf, false) }},
		{"write", func() nvme.Status { return h.rw(nvme.IOWrite, 2, 0, 8, buf, false) }},
		{"inline write", func() nvme.Status { return h.rw(nvme.IOWrite, 2, 0, 1, buf[:512], true) }},
		{"compare", func() nvme.Status { return h.rw(nvme.IOCompare, 2, 0, 8, buf, false) }},
		{"write zeroes", func() nvme.Status {
			c := newCmd(nvme.IOWriteZeroes)
			c.SetNSID(2)
			c.SetCDW(12, nvme.CDW12DEAC|7)
			return h.submit(h.io, c, nil).Status()
		}},
		{"flush", func() nvme.Status {
			c := flushCmd(2)
			return h.submit(h.io, c, nil).Status()
		}},
		{"dsm", func() nvme.Status {
			c := keyed(newCmd(nvme.IODatasetMgmt), nvme.DSMRangeSize)
			c.SetNSID(2)
			c.SetCDW(11, nvme.DSMAttrDeallocate)
			r := make([]byte, nvme.DSMRangeSize)
			nvme.DSMRange(r).Set(0, 8)
			return h.submit(h.io, c, r).Status()
		}},
	}
	for _, state := range nvme.ANAStates {
		t.Run(state.String(), func(t *testing.T) {
			if err := tg.SetANAStates(p.ID, map[uint32]nvme.ANAState{5: state}); err != nil {
				t.Fatal(err)
			}
			want := map[nvme.ANAState]nvme.Status{nvme.ANAInaccessible: 0x302, nvme.ANAPersistentLoss: 0x301, nvme.ANAChange: 0x303}[state]
			for _, op := range ops {
				if st := op.run(); st != want {
					t.Errorf("%s: %v, want %v", op.name, st, want)
				}
			}
			// Group 1 is optimized: its namespace serves I/O.
			if st := h.rw(nvme.IORead, 1, 0, 8, buf, false); st != 0 {
				t.Errorf("read of namespace 1 in group 1: %v", st)
			}
			if _, st := h.identify(nvme.CNSNamespace, 2); st != 0 {
				t.Errorf("identify namespace 2: %v", st)
			}
			if _, st := h.identify(nvme.CNSController, 0); st != 0 {
				t.Errorf("identify controller: %v", st)
			}
			if l := h.readANALog(); l.Groups[1].State != state {
				t.Errorf("ANA log reports %v", l.Groups[1].State)
			}
			if rsp := h.submit(h.admin, newCmd(nvme.AdminKeepAlive), nil); rsp.Status() != 0 {
				t.Errorf("keep alive: %v", rsp.Status())
			}
		})
	}
}

// A state change raises an ANA change event on every controller of the
// port whose host enabled it, and on no other; the event stays masked
// until the host reads the log.
func TestANAChangeEvent(t *testing.T) {
	tg, p := anaTarget(t)
	p2 := &Port{ID: 2, Address: netip.MustParseAddr("10.0.0.2"), ServiceID: 4420, InlineDataSize: 8192, MaxQueueSize: 128}
	if err := tg.AddPort(p2); err != nil {
		t.Fatal(err)
	}
	a := connect(t, tg, p, testNQN)
	b := connect(t, tg, p, testNQN)
	other := connect(t, tg, p2, testNQN)
	aerA := enableAEN(t, a, nvme.OAESANAChange)
	aerOther := enableAEN(t, other, nvme.OAESANAChange)
	enableAEN(t, b, nvme.OAESNSAttrChanged) // not ANA changes
	if err := tg.SetANAStates(p.ID, map[uint32]nvme.ANAState{1: nvme.ANANonOptimized}); err != nil {
		t.Fatal(err)
	}
	want := uint64(nvme.AsyncEventResult(nvme.AsyncTypeNotice, nvme.AsyncNoticeANAChange, nvme.LogANA))
	if rsp := <-aerA; rsp == nil || rsp.Status() != 0 || rsp.Result() != want {
		t.Fatalf("AER: %v, want result %#x", rsp, want)
	}
	holdsAERs(t, b.ctrl(), 1)
	holdsAERs(t, other.ctrl(), 1)

	// Masked until the log is read without RAE.
	aerA = a.admin.SubmitAsync(newCmd(nvme.AdminAsyncEvent), nil)
	setANA(t, tg, p.ID, map[uint32]nvme.ANAState{1: nvme.ANAInaccessible})
	holdsAERs(t, a.ctrl(), 1)
	if _, st := a.anaLog(4096, 0, false, true); st != 0 {
		t.Fatal(st)
	}
	setANA(t, tg, p.ID, map[uint32]nvme.ANAState{1: nvme.ANAChange})
	holdsAERs(t, a.ctrl(), 1)
	a.readANALog()
	setANA(t, tg, p.ID, nil)
	if rsp := <-aerA; rsp == nil || rsp.Result() != want {
		t.Fatalf("AER after the log was read: %v", rsp)
	}
	// Moving a namespace to another group tells every port.
	if err := tg.Subsystem(testNQN).SetANAGroup(1, 7); err != nil {
		t.Fatal(err)
	}
	if rsp := <-aerOther; rsp == nil || rsp.Result() != want {
		t.Fatalf("AER on port 2 after a group change: %v", rsp)
	}
}

func setANA(t *testing.T, tg *Target, port uint16, states map[uint32]nvme.ANAState) {
	t.Helper()
	if err := tg.SetANAStates(port, states); err != nil {
		t.Fatal(err)
	}
}

func TestIdentifyReportsANA(t *testing.T) {
	tg, p := anaTarget(t)
	h := connect(t, tg, p, testNQN)
	id, st := h.identify(nvme.CNSController, 0)
	if st != 0 {
		t.Fatal(st)
	}
	if id[76] != nvme.CMICMultiPort|nvme.CMICMultiController|nvme.CMICANA {
		t.Errorf("CMIC %#x", id[76])
	}
	if le32(id, 92)&nvme.OAESANAChange == 0 {
		t.Errorf("OAES %#x lacks ANA change", le32(id, 92))
	}
	if id[342] != anaTransitionTime || id[343] != 0x1f || le32(id, 344) != nvme.MaxANAGroups || le32(id, 348) != nvme.MaxANAGroups {
		t.Errorf("ANATT %d ANACAP %#x ANAGRPMAX %d NANAGRPID %d", id[342], id[343], le32(id, 344), le32(id, 348))
	}
	ns, _ := h.identify(nvme.CNSNamespace, 2)
	if ns[30] != nvme.NMICShared || le32(ns, 92) != 5 {
		t.Errorf("NMIC %d ANAGRPID %d, want 1 and 5", ns[30], le32(ns, 92))
	}
	// The discovery controller reports none of it.
	d := connect(t, tg, p, nvme.DiscoveryNQN)
	id, _ = d.identify(nvme.CNSController, 0)
	if id[76] != 0 || id[343] != 0 {
		t.Errorf("discovery controller CMIC %#x ANACAP %#x", id[76], id[343])
	}
	if _, st := d.anaLog(4096, 0, false, false); st != nvme.StatusInvalidLogPage|nvme.DNR {
		t.Errorf("discovery ANA log: %v", st)
	}
}

func TestSetANAStatesRefuses(t *testing.T) {
	tg, p, _ := testTarget(t)
	cases := map[string]struct {
		port   uint16
		states map[uint32]nvme.ANAState
	}{
		"unknown port":  {9, nil},
		"group 0":       {p.ID, map[uint32]nvme.ANAState{0: nvme.ANAOptimized}},
		"group 129":     {p.ID, map[uint32]nvme.ANAState{129: nvme.ANAOptimized}},
		"invalid state": {p.ID, map[uint32]nvme.ANAState{1: 5}},
	}
	for name, c := range cases {
		if err := tg.SetANAStates(c.port, c.states); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if p.ANAState(1) != nvme.ANAOptimized || len(p.ANAStates()) != 0 {
		t.Fatalf("refused changes changed the port: %v", p.ANAStates())
	}
}
