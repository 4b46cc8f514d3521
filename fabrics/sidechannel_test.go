package fabrics

import (
	"encoding/binary"
	"testing"

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
