package fabrics

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

const (
	hostA = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000000a"
	hostB = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000000b"
)

// connectAs connects a controller of hostNQN with one I/O queue, enabled.
func connectAs(t *testing.T, tg *Target, p *Port, hostNQN string) *host {
	t.Helper()
	h, _ := connectAdminQueue(t, tg, p, testNQN, hostNQN, 0)
	h.setProperty(nvme.RegCC, ccEnableNVM)
	h.io = NewLoopQueue(tg, p, 1, 128)
	if rsp := h.submit(h.io, connectCmd(1, 127, 0, true), connectData(testNQN, hostNQN, h.cntl)); rsp.Status() != 0 {
		t.Fatalf("io connect of %s: %v", hostNQN, rsp.Status())
	}
	return h
}

// activeNSIDs is the host's Active Namespace ID list, and the one of the
// NVM command set, which must agree.
func activeNSIDs(t *testing.T, h *host) []uint32 {
	t.Helper()
	var lists [2][]uint32
	for i, cns := range []uint8{nvme.CNSActiveNSList, nvme.CNSCSIActiveNSList} {
		b, st := h.identify(cns, 0)
		if st != 0 {
			t.Fatalf("identify CNS %#x: %v", cns, st)
		}
		for off := 0; off < len(b) && le32(b, off) != 0; off += 4 {
			lists[i] = append(lists[i], le32(b, off))
		}
	}
	if !slices.Equal(lists[0], lists[1]) {
		t.Fatalf("active namespace list %v, but %v for the NVM command set", lists[0], lists[1])
	}
	return lists[0]
}

// anaNSIDs is every namespace ID the host's ANA log lists.
func anaNSIDs(t *testing.T, h *host) []uint32 {
	t.Helper()
	b, st := h.getLog(nvme.LogANA, 4096, 0)
	if st != 0 {
		t.Fatalf("ANA log: %v", st)
	}
	l, err := nvme.ParseANALog(b)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint32
	for _, g := range l.Groups {
		ids = append(ids, g.NSIDs...)
	}
	return ids
}

// smartStatus is the status of the SMART log read for nsid.
func smartStatus(h *host, nsid uint32) nvme.Status {
	c := keyed(newCmd(nvme.AdminGetLogPage), nvme.SMARTLogSize)
	c.SetNSID(nsid)
	c.SetCDW(10, uint32(nvme.LogSMART)|uint32(nvme.SMARTLogSize/4-1)<<16)
	return h.submit(h.admin, c, make([]byte, nvme.SMARTLogSize)).Status()
}

// twoTenants is the test subsystem with namespace 1 shared, 2 for hostA
// alone and 3 for hostB alone, limited before they are published.
func twoTenants(t *testing.T) (*Target, *Port, [4]*memBackend) {
	t.Helper()
	tg, p, mem1 := testTarget(t)
	s := tg.Subsystem(testNQN)
	mems := [4]*memBackend{nil, mem1, newMem(1<<20, 512), newMem(1<<20, 512)}
	for nsid, only := range map[uint32]string{2: hostA, 3: hostB} {
		if err := s.SetNamespaceHosts(nsid, []string{only}); err != nil {
			t.Fatal(err)
		}
		addNamespace(t, tg, nsid, resizableMem{mems[nsid]})
	}
	return tg, p, mems
}

// A hidden namespace is, to the controller, an inactive one: in every
// Identify and log page that names namespaces, and to every I/O command.
func TestHiddenNamespaceIsInactiveToTheController(t *testing.T) {
	tg, p, _ := twoTenants(t)
	a := connectAs(t, tg, p, hostA)
	b := connectAs(t, tg, p, hostB)
	for _, c := range []struct {
		h              *host
		sees, hidden   uint32
		wantActive     []uint32
		name, otherOne string
	}{{a, 2, 3, []uint32{1, 2}, "A", "B"}, {b, 3, 2, []uint32{1, 3}, "B", "A"}} {
		h := c.h
		if got := activeNSIDs(t, h); !slices.Equal(got, c.wantActive) {
			t.Errorf("host %s: active namespaces %v, want %v", c.name, got, c.wantActive)
		}
		// Past its own namespace the list goes on with none of the other's.
		if b, _ := h.identify(nvme.CNSActiveNSList, c.sees); le32(b, 0) != 0 {
			t.Errorf("host %s: active list after nsid %d starts with %d", c.name, c.sees, le32(b, 0))
		}
		id, st := h.identify(nvme.CNSNamespace, c.hidden)
		if st != 0 || slices.ContainsFunc(id, func(x byte) bool { return x != 0 }) {
			t.Errorf("host %s: Identify Namespace %d of host %s: status %v, not all zeros", c.name, c.hidden, c.otherOne, st)
		}
		if id, _ := h.identify(nvme.CNSNamespace, c.sees); binary.LittleEndian.Uint64(id) == 0 {
			t.Errorf("host %s: Identify Namespace %d of its own reads as inactive", c.name, c.sees)
		}
		if _, st := h.identify(nvme.CNSNSDescList, c.hidden); st != nvme.StatusInvalidNamespace|nvme.DNR {
			t.Errorf("host %s: descriptor list of hidden namespace %d: %v, want Invalid Namespace", c.name, c.hidden, st)
		}
		if _, st := h.identify(nvme.CNSNSDescList, c.sees); st != 0 {
			t.Errorf("host %s: descriptor list of its namespace %d: %v", c.name, c.sees, st)
		}
		if st := smartStatus(h, c.hidden); st != nvme.StatusInvalidNamespace|nvme.DNR {
			t.Errorf("host %s: SMART log of hidden namespace %d: %v, want Invalid Namespace", c.name, c.hidden, st)
		}
		for _, nsid := range []uint32{c.sees, 0, nvme.NSIDBroadcast} {
			if st := smartStatus(h, nsid); st != 0 {
				t.Errorf("host %s: SMART log for nsid %#x: %v", c.name, nsid, st)
			}
		}
		if got := anaNSIDs(t, h); !slices.Equal(got, c.wantActive) {
			t.Errorf("host %s: ANA log lists %v, want %v", c.name, got, c.wantActive)
		}
		for _, op := range []uint8{nvme.IORead, nvme.IOWrite, nvme.IOFlush} {
			buf := make([]byte, 512)
			if op == nvme.IOFlush {
				buf = nil
			}
			cmd := ioCmd(op, c.hidden, 0, 1, len(buf))
			if st := h.submit(h.io, cmd, buf).Status(); st != nvme.StatusInvalidNamespace|nvme.DNR {
				t.Errorf("host %s: opcode %#x to hidden namespace %d: %v, want Invalid Namespace or Format", c.name, op, c.hidden, st)
			}
		}
		if st := h.rw(nvme.IORead, c.sees, 0, 1, make([]byte, 512), false); st != 0 {
			t.Errorf("host %s: read of its namespace %d: %v", c.name, c.sees, st)
		}
	}
}

// A broadcast Flush flushes what the controller sees, nothing else.
func TestBroadcastFlushOnlyVisibleNamespaces(t *testing.T) {
	tg, p, mems := twoTenants(t)
	a := connectAs(t, tg, p, hostA)
	fl := flushCmd(nvme.NSIDBroadcast)
	if st := a.submit(a.io, fl, nil).Status(); st != 0 {
		t.Fatalf("broadcast flush: %v", st)
	}
	for nsid, want := range map[int]int{1: 1, 2: 1, 3: 0} {
		if got := mems[nsid].flushCount(); got != want {
			t.Errorf("namespace %d flushed %d times by host A's broadcast flush, want %d", nsid, got, want)
		}
	}
}

// A live change tells exactly the controllers whose view changed: each
// gets the Changed Namespace List entry and the event, the others neither.
func TestLiveVisibilityChangeEventsExactlyTheChangedControllers(t *testing.T) {
	tg, p, _ := twoTenants(t)
	s := tg.Subsystem(testNQN)
	a, a2, b := connectAs(t, tg, p, hostA), connectAs(t, tg, p, hostA), connectAs(t, tg, p, hostB)
	hosts := map[string]*host{"A": a, "A's second controller": a2, "B": b}
	w := watchNSChanges(t, hosts)
	expect := w.expect
	if err := s.SetNamespaceHosts(2, []string{hostA, hostB}); err != nil {
		t.Fatal(err)
	}
	expect("namespace 2 shared with B", 2, map[string][]uint32{"B": {1, 2, 3}})
	if err := s.SetNamespaceHosts(2, []string{hostB}); err != nil {
		t.Fatal(err)
	}
	expect("namespace 2 taken from A", 2, map[string][]uint32{"A": {1}, "A's second controller": {1}})
	if err := s.SetNamespaceHosts(2, []string{hostB}); err != nil {
		t.Fatal(err)
	}
	expect("the same hosts again", 2, nil)
	if err := s.SetNamespaceHosts(1, []string{}); err != nil {
		t.Fatal(err)
	}
	expect("namespace 1 hidden from every host", 1, map[string][]uint32{"A": {}, "A's second controller": {}, "B": {2, 3}})
	if err := s.SetNamespaceHosts(1, nil); err != nil {
		t.Fatal(err)
	}
	expect("namespace 1 for every host again", 1, map[string][]uint32{"A": {1}, "A's second controller": {1}, "B": {1, 2, 3}})

	// Published, resized or removed, a namespace a host cannot see is no
	// news to it.
	if err := s.SetNamespaceHosts(4, []string{hostA}); err != nil {
		t.Fatal(err)
	}
	expect("limits of a namespace not yet published", 0, nil)
	addNamespace(t, tg, 4, newMem(1<<20, 512))
	expect("namespace 4 added for A", 4, map[string][]uint32{"A": {1, 4}, "A's second controller": {1, 4}})
	if _, err := s.ResizeNamespace(3, 2<<20); err != nil {
		t.Fatal(err)
	}
	expect("namespace 3 resized", 3, map[string][]uint32{"B": {1, 2, 3}})
	if err := s.RemoveNamespace(4); err != nil {
		t.Fatal(err)
	}
	expect("namespace 4 removed", 4, map[string][]uint32{"A": {1}, "A's second controller": {1}})
	// Its limit went with it: the ID used again is for every host.
	addNamespace(t, tg, 4, newMem(1<<20, 512))
	expect("namespace 4 added again, unlimited", 4, map[string][]uint32{"A": {1, 4}, "A's second controller": {1, 4}, "B": {1, 2, 3, 4}})
}

// nsChangeWatch holds an Asynchronous Event Request of each host's for
// namespace attribute changes.
type nsChangeWatch struct {
	t     *testing.T
	hosts map[string]*host
	aers  map[string]<-chan nvme.Completion
}

// watchNSChanges enables the event on each of hosts' controllers, each
// then holding one AER.
func watchNSChanges(t *testing.T, hosts map[string]*host) *nsChangeWatch {
	w := &nsChangeWatch{t: t, hosts: hosts, aers: map[string]<-chan nvme.Completion{}}
	for name, h := range hosts {
		w.aers[name] = enableAEN(t, h, nvme.OAESNSAttrChanged)
		holdsAERs(t, h.ctrl(), 1)
	}
	return w
}

// expect checks who got the event, and that each of them reads the
// Changed Namespace List naming nsid and sees active.
func (w *nsChangeWatch) expect(step string, nsid uint32, changed map[string][]uint32) {
	t := w.t
	t.Helper()
	for name, h := range w.hosts {
		want, ok := changed[name]
		aersHeld, events := pendingEvents(h.ctrl())
		if !ok {
			if aersHeld != 1 || events != 0 {
				t.Errorf("%s: host %s, whose view did not change, was told (%d AERs held, %d events)", step, name, aersHeld, events)
			}
			continue
		}
		if aersHeld != 0 {
			// The event takes the AER before the change returns.
			t.Fatalf("%s: host %s, whose view changed, was not told", step, name)
		}
		rsp := <-w.aers[name]
		if rsp == nil || rsp.Result() != nvme.AsyncTypeNotice|uint64(nvme.LogChangedNS)<<16 {
			t.Fatalf("%s: host %s: AER completion %v, want namespace attribute changed", step, name, rsp)
		}
		page, st := h.getLog(nvme.LogChangedNS, nvme.ChangedNSLogSize, 0)
		if st != 0 || le32(page, 0) != nsid || le32(page, 4) != 0 {
			t.Errorf("%s: host %s: Changed Namespace List starts %d, %d (%v), want only %d", step, name, le32(page, 0), le32(page, 4), st, nsid)
		}
		if got := activeNSIDs(t, h); !slices.Equal(got, want) {
			t.Errorf("%s: host %s: active namespaces %v, want %v", step, name, got, want)
		}
		w.aers[name] = h.admin.SubmitAsync(newCmd(nvme.AdminAsyncEvent), nil)
		holdsAERs(t, h.ctrl(), 1)
	}
}

// Commands in flight on a namespace as it is hidden from their host
// complete as usual; the host's next ones fail with Invalid Namespace.
func TestHidingANamespaceWithCommandsInFlight(t *testing.T) {
	tg, p, _ := testTarget(t)
	s := tg.Subsystem(testNQN)
	g := newGateBackend()
	ns2 := addNamespace(t, tg, 2, g)
	a := connectAs(t, tg, p, hostA)
	inflight := a.io.SubmitAsync(ioCmd(nvme.IORead, 2, 0, 1, 512), make([]byte, 512))
	<-g.entered // the read is in the backend
	// The change does not wait for the read: it returns with it in flight.
	if err := s.SetNamespaceHosts(2, []string{hostB}); err != nil {
		t.Fatal(err)
	}
	if st := a.rw(nvme.IORead, 2, 0, 1, make([]byte, 512), false); st != nvme.StatusInvalidNamespace|nvme.DNR {
		t.Fatalf("read after namespace 2 was hidden: %v, want Invalid Namespace or Format", st)
	}
	close(g.gate)
	if rsp := <-inflight; rsp == nil || rsp.Status() != 0 {
		t.Fatalf("read in flight as its namespace was hidden: %v, want success", rsp)
	}
	if n := ns2.InFlight(); n != 0 {
		t.Fatalf("namespace 2 has %d commands in flight after the read completed", n)
	}
}

func TestSetNamespaceHostsRefusesBadNSID(t *testing.T) {
	s := NewSubsystem(testNQN, "", "", true)
	for _, nsid := range []uint32{0, nvme.MaxNamespaces + 1, nvme.NSIDBroadcast} {
		if err := s.SetNamespaceHosts(nsid, []string{hostA}); err == nil {
			t.Errorf("nsid %#x accepted", nsid)
		}
	}
}

// A shutdown notification flushes the namespaces the controller sees,
// not those of other hosts: theirs are not its to make durable.
func TestShutdownFlushesOnlyVisibleNamespaces(t *testing.T) {
	tg, p, mems := twoTenants(t)
	bg := trackBackground(tg)
	a := connectAs(t, tg, p, hostA)
	a.setProperty(nvme.RegCC, ccEnableNVM|1<<nvme.CCShnShift)
	bg.Wait()
	if csts := a.getProperty(nvme.RegCSTS, false); csts&nvme.CSTSShstMask != nvme.CSTSShstComplete {
		t.Fatalf("CSTS %#x once the flush returned, want SHST complete", csts)
	}
	for nsid, want := range map[int]int{1: 1, 2: 1, 3: 0} {
		if got := mems[nsid].flushCount(); got != want {
			t.Errorf("namespace %d flushed %d times by host A's shutdown, want %d", nsid, got, want)
		}
	}
}
