package fabrics

import (
	"net/netip"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A pinned group has its state on every port, raises the ANA change event,
// survives the ports' configured states being set again, and is given to a
// port added later; I/O to it follows the pinned state.
func TestPinANAGroup(t *testing.T) {
	tg, p := anaTarget(t)
	h := connect(t, tg, p, testNQN)
	aer := enableAEN(t, h, nvme.OAESANAChange)
	if err := tg.PinANAGroup(1, nvme.ANAInaccessible); err != nil {
		t.Fatal(err)
	}
	want := uint64(nvme.AsyncEventResult(nvme.AsyncTypeNotice, nvme.AsyncNoticeANAChange, nvme.LogANA))
	if rsp := <-aer; rsp == nil || rsp.Result() != want {
		t.Fatalf("AER after the pin: %v", rsp)
	}
	if got := p.ANAState(1); got != nvme.ANAInaccessible {
		t.Fatalf("pinned group 1 is %v", got)
	}
	// The configured states are set again (a reload): the pin stays,
	// the other groups change.
	setANA(t, tg, p.ID, map[uint32]nvme.ANAState{1: nvme.ANAOptimized, 5: nvme.ANANonOptimized})
	if got := p.ANAStates(); len(got) != 2 || got[1] != nvme.ANAInaccessible || got[5] != nvme.ANANonOptimized {
		t.Fatalf("after setting the port's states: %v", got)
	}
	if l := h.readANALog(); l.Groups[0].ID != 1 || l.Groups[0].State != nvme.ANAInaccessible {
		t.Fatalf("ANA log: %+v", l.Groups)
	}
	p2 := &Port{ID: 2, Address: netip.MustParseAddr("10.0.0.2"), ServiceID: 4420, InlineDataSize: 8192, MaxQueueSize: 128}
	if err := tg.AddPort(p2); err != nil {
		t.Fatal(err)
	}
	if got := p2.ANAState(1); got != nvme.ANAInaccessible {
		t.Fatalf("port added after the pin: group 1 is %v", got)
	}
	if err := tg.PinANAGroup(1, nvme.ANAOptimized); err != nil {
		t.Fatal(err)
	}
	for _, port := range []*Port{p, p2} {
		if got := port.ANAState(1); got != nvme.ANAOptimized {
			t.Errorf("port %d: group 1 is %v after pinning it optimized", port.ID, got)
		}
	}
	if got := tg.PinnedANAGroups(); len(got) != 1 || got[1] != nvme.ANAOptimized {
		t.Errorf("pinned: %v", got)
	}
	tg.UnpinANAGroup(1)
	setANA(t, tg, p.ID, map[uint32]nvme.ANAState{1: nvme.ANANonOptimized})
	if got := p.ANAState(1); got != nvme.ANANonOptimized {
		t.Errorf("unpinned group 1 is %v, want the configured state", got)
	}
	if err := tg.PinANAGroup(0, nvme.ANAOptimized); err == nil {
		t.Error("group 0 pinned")
	}
}
