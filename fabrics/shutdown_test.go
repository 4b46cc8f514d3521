package fabrics

import (
	"sync/atomic"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A host toggling CC.SHN on and off while a shutdown flush runs gets one
// flush running, not one per toggle; the last notification still gets a
// flush that began after it, and then SHST complete.
func TestShutdownToggleCoalesces(t *testing.T) {
	tg, p, _ := testTarget(t)
	var started atomic.Int32
	bg := trackBackground(tg)
	inner := tg.background
	tg.background = func(f func()) { started.Add(1); inner(f) }
	fg := &flushGate{memBackend: newMem(1<<20, 512), entered: make(chan struct{}, 1), release: make(chan struct{})}
	addNamespace(t, tg, 2, fg)
	h := connect(t, tg, p, testNQN)
	h.setProperty(nvme.RegCC, ccEnableNVM|1<<nvme.CCShnShift)
	<-fg.entered
	for range 1000 {
		h.setProperty(nvme.RegCC, ccEnableNVM)
		h.setProperty(nvme.RegCC, ccEnableNVM|1<<nvme.CCShnShift)
	}
	if n := started.Load(); n != 1 {
		t.Fatalf("%d shutdown flushes started for 1001 shutdown notifications, want 1", n)
	}
	if csts := h.getProperty(nvme.RegCSTS, false); csts&nvme.CSTSShstMask != nvme.CSTSShstProcessing {
		t.Fatalf("CSTS %#x while the flush runs", csts)
	}
	close(fg.release)
	bg.Wait()
	if n := fg.flushCount(); n != 2 {
		t.Fatalf("%d flushes; want 2: the one running, and one after the last notification", n)
	}
	if csts := h.getProperty(nvme.RegCSTS, false); csts&nvme.CSTSShstMask != nvme.CSTSShstComplete {
		t.Fatalf("CSTS %#x after the flushes, want SHST complete", csts)
	}
}
