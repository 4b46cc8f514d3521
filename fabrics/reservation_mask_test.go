package fabrics

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Set Features Reservation Notification Mask with NSID FFFFFFFFh covers
// the namespaces attached to the controller that have reservations: not
// one hidden from its host, nor one with reservations off, nor one
// attached later. A hidden namespace's mask cannot be set by name either.
func TestResvMaskBroadcastScope(t *testing.T) {
	tg, p, _ := testTarget(t)
	s := tg.Subsystem(testNQN)
	if err := s.SetNamespaceHosts(2, []string{"nqn.2014-08.org.nvmexpress:uuid:someone-else"}); err != nil {
		t.Fatal(err)
	}
	addNamespace(t, tg, 2, newMem(1<<20, 512))
	addNamespace(t, tg, 3, newMem(1<<20, 512)).SetReservations(false)
	h := resvHost(t, tg, p, 1)
	wantStatus(t, "mask of a hidden namespace", h.setFeature(nvme.FeatResvMask, 2, nvme.ResvMaskAll), nvme.StatusInvalidNamespace|nvme.DNR)
	must(t, "mask every namespace", h.setFeature(nvme.FeatResvMask, nvme.NSIDBroadcast, nvme.ResvMaskRegPreempted))
	if v, st := h.getFeature(nvme.FeatResvMask, 1); st != 0 || v != nvme.ResvMaskRegPreempted {
		t.Fatalf("namespace 1 mask %#x %v, want %#x", v, st, nvme.ResvMaskRegPreempted)
	}
	c := h.ctrl()
	if m := c.resvMask(2); m != 0 {
		t.Errorf("hidden namespace 2 masked %#x", m)
	}
	if m := c.resvMask(3); m != 0 {
		t.Errorf("namespace 3, reservations off, masked %#x", m)
	}
	addNamespace(t, tg, 4, newMem(1<<20, 512))
	if v, st := h.getFeature(nvme.FeatResvMask, 4); st != 0 || v != 0 {
		t.Errorf("namespace 4, attached after the broadcast: mask %#x %v, want 0", v, st)
	}
	if err := s.SetNamespaceHosts(2, nil); err != nil {
		t.Fatal(err)
	}
	if v, st := h.getFeature(nvme.FeatResvMask, 2); st != 0 || v != 0 {
		t.Errorf("namespace 2, shown after the broadcast: mask %#x %v, want 0", v, st)
	}
}
