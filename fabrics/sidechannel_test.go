package fabrics

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// What a namespace hidden from a host must not tell it through pages that
// sum or describe several namespaces (visibility.go).

// smartLog reads the SMART / Health Information log for nsid.
func smartLog(t *testing.T, h *host, nsid uint32) []byte {
	t.Helper()
	c := keyed(newCmd(nvme.AdminGetLogPage), nvme.SMARTLogSize)
	c.SetNSID(nsid)
	c.SetCDW(10, uint32(nvme.LogSMART)|uint32(nvme.SMARTLogSize/4-1)<<16)
	b := make([]byte, nvme.SMARTLogSize)
	if st := h.submit(h.admin, c, b).Status(); st != 0 {
		t.Fatalf("SMART log for nsid %#x: %v", nsid, st)
	}
	return b
}

// smartWrites is the host write commands and data units written of a
// SMART log (the low 64 bits of the 128-bit counters).
type smartWrites struct{ commands, units uint64 }

func smartWritesOf(page []byte) smartWrites {
	return smartWrites{binary.LittleEndian.Uint64(page[80:]), binary.LittleEndian.Uint64(page[48:])}
}

// The SMART log counts the I/O of the namespaces the host sees: all of
// them for the controller's page, the one named for a namespace's page
// (Identify LPA bit 0 says there is one), and removed namespaces for the
// hosts that saw them.
func TestSMARTLogCountsOnlyVisibleNamespaces(t *testing.T) {
	tg, p, _ := twoTenants(t)
	a := connectAs(t, tg, p, hostA)
	b := connectAs(t, tg, p, hostB)
	if id, _ := a.identify(nvme.CNSController, 0); id[261]&nvme.LPAPerNamespaceSMART == 0 {
		t.Errorf("Identify LPA %#x: no SMART log per namespace", id[261])
	}
	write := func(h *host, nsid uint32, n, times int) {
		t.Helper()
		for range times {
			if st := h.rw(nvme.IOWrite, nsid, 0, n/512, make([]byte, n), false); st != 0 {
				t.Fatalf("write to namespace %d: %v", nsid, st)
			}
		}
	}
	write(a, 2, 4096, 1)   // 8 units of 512 bytes
	write(b, 3, 64<<10, 9) // 1152
	write(a, 1, 4096, 1)   // 8, shared
	check := func(step string, want map[*host]map[uint32]smartWrites) {
		t.Helper()
		for h, pages := range want {
			name := map[*host]string{a: "A", b: "B"}[h]
			for nsid, w := range pages {
				if got := smartWritesOf(smartLog(t, h, nsid)); got != w {
					t.Errorf("%s: host %s, SMART log for nsid %#x: %d write commands, %d data units written; want %d, %d",
						step, name, nsid, got.commands, got.units, w.commands, w.units)
				}
			}
		}
	}
	check("three namespaces", map[*host]map[uint32]smartWrites{
		a: {nvme.NSIDBroadcast: {2, 1}, 0: {2, 1}, 1: {1, 1}, 2: {1, 1}},
		b: {nvme.NSIDBroadcast: {10, 2}, 1: {1, 1}, 3: {9, 2}},
	})
	s := tg.Subsystem(testNQN)
	if err := s.RemoveNamespace(3); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveNamespace(2); err != nil {
		t.Fatal(err)
	}
	// The totals stay with the hosts that saw the namespaces.
	check("namespaces 2 and 3 removed", map[*host]map[uint32]smartWrites{
		a: {nvme.NSIDBroadcast: {2, 1}},
		b: {nvme.NSIDBroadcast: {10, 2}},
	})
}

// anaGroups is the host's ANA log as group → state and namespaces.
func anaGroups(t *testing.T, h *host) map[uint32]string {
	t.Helper()
	out := map[uint32]string{}
	for _, g := range h.readANALog().Groups {
		out[g.ID] = fmt.Sprintf("%v %v", g.State, g.NSIDs)
	}
	return out
}

// An ANA change tells the controllers that see a namespace it concerns,
// and no other: to them the ANA log, which lists only what they see, is
// the same, and the event would say that namespaces they cannot see exist
// and changed.
func TestANAChangeEventsOnlyControllersThatSeeTheNamespace(t *testing.T) {
	tg, p, _ := twoTenants(t)
	s := tg.Subsystem(testNQN)
	if err := s.SetANAGroup(3, 5); err != nil { // B's alone
		t.Fatal(err)
	}
	a, b := connectAs(t, tg, p, hostA), connectAs(t, tg, p, hostB)
	hosts := map[string]*host{"A": a, "B": b}
	aers := map[string]<-chan nvme.Completion{}
	for name, h := range hosts {
		aers[name] = enableAEN(t, h, nvme.OAESANAChange)
		holdsAERs(t, h.ctrl(), 1)
	}
	want := uint64(nvme.AsyncEventResult(nvme.AsyncTypeNotice, nvme.AsyncNoticeANAChange, nvme.LogANA))
	// expect checks who got the event; each of them reads the ANA log
	// (which unmasks the event) and sends a new AER.
	expect := func(step string, told ...string) {
		t.Helper()
		for name, h := range hosts {
			aersHeld, events := pendingEvents(h.ctrl())
			if !slices.Contains(told, name) {
				if aersHeld != 1 || events != 0 {
					t.Errorf("%s: host %s, which sees no namespace of the change, was told (%d AERs held, %d events)", step, name, aersHeld, events)
				}
				continue
			}
			if aersHeld != 0 {
				t.Fatalf("%s: host %s was not told", step, name)
			}
			if rsp := <-aers[name]; rsp == nil || rsp.Result() != want {
				t.Fatalf("%s: host %s: AER completion %v, want ANA change", step, name, rsp)
			}
			h.readANALog()
			aers[name] = h.admin.SubmitAsync(newCmd(nvme.AdminAsyncEvent), nil)
			holdsAERs(t, h.ctrl(), 1)
		}
	}
	if err := tg.SetANAStates(p.ID, map[uint32]nvme.ANAState{5: nvme.ANAInaccessible}); err != nil {
		t.Fatal(err)
	}
	expect("group 5 (namespace 3) inaccessible", "B")
	// Each host's ANA log lists what it sees, with the states it has.
	for name, w := range map[string]map[uint32]string{
		"A": {1: "optimized [1 2]"},
		"B": {1: "optimized [1]", 5: "inaccessible [3]"},
	} {
		if got := anaGroups(t, hosts[name]); !maps.Equal(got, w) {
			t.Errorf("host %s: ANA log %v, want %v", name, got, w)
		}
	}
	if err := tg.SetANAStates(p.ID, map[uint32]nvme.ANAState{5: nvme.ANAInaccessible, 9: nvme.ANAChange}); err != nil {
		t.Fatal(err)
	}
	expect("group 9, which has no namespace, changing")
	if err := s.SetANAGroup(2, 7); err != nil { // A's alone
		t.Fatal(err)
	}
	expect("namespace 2 moved to group 7", "A")
	s.Namespace(3).SetReservationUnavailable(true)
	expect("namespace 3's reservation state unavailable", "B")
	s.Namespace(3).SetReservationUnavailable(false)
	expect("namespace 3's reservation state available again", "B")
	if err := tg.SetANAStates(p.ID, map[uint32]nvme.ANAState{1: nvme.ANANonOptimized}); err != nil {
		t.Fatal(err)
	}
	expect("group 1 (the shared namespace 1) non-optimized, 5 optimized", "A", "B")
	if err := s.SetANAGroup(1, 9); err != nil {
		t.Fatal(err)
	}
	expect("the shared namespace moved", "A", "B")
}

// Identify VWC reports a volatile write cache when a namespace the host
// sees has one: a cache only a hidden namespace has would say it exists.
// A cached namespace the host comes to see later is written through for
// it, as the host, told of no cache, never flushes.
func TestVolatileWriteCacheOnlyOfVisibleNamespaces(t *testing.T) {
	tg, p := targetWith(t, newRecorder(backend.Traits{}))
	s := tg.Subsystem(testNQN)
	cached := newRecorder(backend.Traits{VolatileCache: true})
	if err := s.SetNamespaceHosts(2, []string{hostA}); err != nil {
		t.Fatal(err)
	}
	addNamespace(t, tg, 2, cached)
	a, b := connectAs(t, tg, p, hostA), connectAs(t, tg, p, hostB)
	if vwc := identifyVWC(t, a); vwc != nvme.VWCPresent|nvme.VWCFlushBroadcast {
		t.Errorf("host A, which sees the cached namespace 2: VWC %#x, want %#x", vwc, nvme.VWCPresent|nvme.VWCFlushBroadcast)
	}
	if vwc := identifyVWC(t, b); vwc != 0 {
		t.Errorf("host B, which sees only uncached namespace 1: VWC %#x, want 0", vwc)
	}
	if _, st := b.feature(false, nvme.FeatVolatileWC, 0); st != nvme.StatusInvalidField {
		t.Errorf("host B: Get Features Volatile Write Cache: %v, want Invalid Field", st)
	}
	if err := s.SetNamespaceHosts(2, []string{hostA, hostB}); err != nil {
		t.Fatal(err)
	}
	if st := b.rw(nvme.IOWrite, 2, 0, 1, make([]byte, 512), false); st != 0 {
		t.Fatal(st)
	}
	if w, sync := cached.writes.Load(), cached.syncWrites.Load(); w != 0 || sync != 1 {
		t.Errorf("host B's write to the cached namespace it now sees: %d cached, %d durable writes; want 0 and 1", w, sync)
	}
}

// Every admin command that takes an NSID answers a namespace hidden from
// the host exactly as one that does not exist: the same status, result
// and data.
func TestHiddenNSIDAnswersAsAnAbsentOne(t *testing.T) {
	tg, p, _ := twoTenants(t)
	a, b := connectAs(t, tg, p, hostA), connectAs(t, tg, p, hostB)
	const hidden, absent = 3, 9 // B's alone; none
	// Something to tell, were the hidden namespace's pages shown.
	if st := b.rw(nvme.IOWrite, hidden, 0, 1, make([]byte, 512), false); st != 0 {
		t.Fatal(st)
	}
	identify := func(cns uint8, csi uint8) func(uint32) (nvme.Command, int) {
		return func(nsid uint32) (nvme.Command, int) {
			c := keyed(newCmd(nvme.AdminIdentify), nvme.IdentifySize)
			c.SetNSID(nsid)
			c.SetCDW(10, uint32(cns))
			c.SetCDW(11, uint32(csi)<<24)
			return c, nvme.IdentifySize
		}
	}
	log := func(lid uint8, n int) func(uint32) (nvme.Command, int) {
		return func(nsid uint32) (nvme.Command, int) {
			c := keyed(newCmd(nvme.AdminGetLogPage), n)
			c.SetNSID(nsid)
			c.SetCDW(10, uint32(lid)|uint32(n/4-1)<<16|1<<15) // RAE: the pages stay as they are
			return c, n
		}
	}
	feature := func(op, fid uint8, v uint32) func(uint32) (nvme.Command, int) {
		return func(nsid uint32) (nvme.Command, int) {
			c := newCmd(op)
			c.SetNSID(nsid)
			c.SetCDW(10, uint32(fid))
			c.SetCDW(11, v)
			return c, 0
		}
	}
	for _, tc := range []struct {
		name string
		cmd  func(nsid uint32) (nvme.Command, int)
	}{
		{"Identify Namespace", identify(nvme.CNSNamespace, 0)},
		{"Identify Namespace Identification Descriptor list", identify(nvme.CNSNSDescList, 0)},
		{"Identify Namespace of the NVM command set", identify(nvme.CNSCSINamespace, nvme.CSINVM)},
		{"Identify Active Namespace ID list after it", identify(nvme.CNSActiveNSList, 0)},
		{"SMART / Health Information log", log(nvme.LogSMART, nvme.SMARTLogSize)},
		{"Commands Supported and Effects log", log(nvme.LogCmdEffects, nvme.EffectsLogSize)},
		{"Changed Namespace List log", log(nvme.LogChangedNS, nvme.ChangedNSLogSize)},
		{"Reservation Notification log", log(nvme.LogReservation, nvme.ResvLogSize)},
		{"ANA log", log(nvme.LogANA, 4096)},
		{"Get Features Reservation Notification Mask", feature(nvme.AdminGetFeatures, nvme.FeatResvMask, 0)},
		{"Get Features Reservation Persistence", feature(nvme.AdminGetFeatures, nvme.FeatResvPersist, 0)},
		{"Set Features Reservation Notification Mask", feature(nvme.AdminSetFeatures, nvme.FeatResvMask, 0xe)},
		{"Set Features Reservation Persistence", feature(nvme.AdminSetFeatures, nvme.FeatResvPersist, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := func(nsid uint32) (nvme.Status, uint64, []byte) {
				c, n := tc.cmd(nsid)
				b := make([]byte, n)
				rsp := a.submit(a.admin, c, b)
				return rsp.Status(), rsp.Result(), b
			}
			hst, hres, hdata := answer(hidden)
			ast, ares, adata := answer(absent)
			if hst != ast || hres != ares || !slices.Equal(hdata, adata) {
				t.Errorf("hidden namespace %d: status %v, result %#x; absent namespace %d: status %v, result %#x; data equal %v",
					hidden, hst, hres, absent, ast, ares, slices.Equal(hdata, adata))
			}
		})
	}
}

// The ANA log's change count moves with what the host's ANA log reports,
// not with changes of namespaces hidden from it.
func TestANALogChangeCountOnlyOfVisibleChanges(t *testing.T) {
	tg, p, _ := twoTenants(t)
	s := tg.Subsystem(testNQN)
	a, b := connectAs(t, tg, p, hostA), connectAs(t, tg, p, hostB)
	counts := func() [2]uint64 { return [2]uint64{a.readANALog().ChangeCount, b.readANALog().ChangeCount} }
	before := counts()
	for _, step := range []struct {
		name   string
		change func() error
		moved  [2]uint64 // how much A's and B's counts go up
	}{
		{"namespace 3 (B's) moved to group 5", func() error { return s.SetANAGroup(3, 5) }, [2]uint64{0, 1}},
		{"group 5 inaccessible", func() error {
			return tg.SetANAStates(p.ID, map[uint32]nvme.ANAState{5: nvme.ANAInaccessible})
		}, [2]uint64{0, 1}},
		{"namespace 2 (A's) moved to group 7", func() error { return s.SetANAGroup(2, 7) }, [2]uint64{1, 0}},
		{"group 1 (the shared namespace 1) non-optimized", func() error {
			return tg.SetANAStates(p.ID, map[uint32]nvme.ANAState{1: nvme.ANANonOptimized, 5: nvme.ANAInaccessible})
		}, [2]uint64{1, 1}},
	} {
		if err := step.change(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		after := counts()
		if moved := [2]uint64{after[0] - before[0], after[1] - before[1]}; moved != step.moved {
			t.Errorf("%s: the change counts of A and B went up by %v, want %v", step.name, moved, step.moved)
		}
		before = after
	}
}
