package fabrics

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// gateBackend blocks reads until gate is closed and records Close.
// gateBackend holds every read until gate closes; entered receives one
// token per read that reached it.
type gateBackend struct {
	*memBackend
	gate    chan struct{}
	entered chan struct{}
	closed  atomic.Bool
}

func newGateBackend() *gateBackend {
	return &gateBackend{memBackend: newMem(1<<20, 512), gate: make(chan struct{}), entered: make(chan struct{}, 16)}
}

func (g *gateBackend) ReadAt(p []byte, off int64) error {
	g.entered <- struct{}{}
	<-g.gate
	if g.closed.Load() {
		panic("read on a closed backend")
	}
	return g.memBackend.ReadAt(p, off)
}

func (g *gateBackend) Close() error { g.closed.Store(true); return nil }

func enableAEN(t *testing.T, h *host, bits uint32) <-chan nvme.Completion {
	t.Helper()
	aec := newCmd(nvme.AdminSetFeatures)
	aec.SetCDW(10, nvme.FeatAsyncEvent)
	aec.SetCDW(11, bits)
	if st := h.submit(h.admin, aec, nil).Status(); st != 0 {
		t.Fatalf("set async event config: %v", st)
	}
	aer := newCmd(nvme.AdminAsyncEvent)
	aer.SetCID(900)
	return h.admin.SubmitAsync(aer, nil)
}

func TestRemoveNamespaceWhileConnected(t *testing.T) {
	tg, p, _ := testTarget(t)
	s := tg.Subsystem(testNQN)
	g := newGateBackend()
	addNamespace(t, tg, 2, g)
	h := connect(t, tg, p, testNQN)
	aen := enableAEN(t, h, nvme.OAESNSAttrChanged)

	// A read on namespace 2 is in flight when the operator removes it.
	rd := newCmd(nvme.IORead)
	rd.SetNSID(2)
	keyed(rd, 512)
	inflight := h.io.SubmitAsync(rd, make([]byte, 512))
	<-g.entered // the read is in the backend
	removed := make(chan error, 1)
	go func() { removed <- s.RemoveNamespace(2) }()

	rsp := <-aen
	if rsp == nil || rsp.Result() != nvme.AsyncTypeNotice|uint64(nvme.LogChangedNS)<<16 {
		t.Fatalf("AER completion %v, want namespace attribute changed", rsp)
	}
	// The event is raised once the namespace is out of the set; the
	// removal must still be waiting for the read.
	select {
	case err := <-removed:
		t.Fatalf("removal returned (%v) with a command in flight", err)
	default:
	}
	if g.closed.Load() {
		t.Fatal("backend closed with a command in flight")
	}
	close(g.gate)
	if c := <-inflight; c == nil || c.Status() != 0 {
		t.Fatalf("in-flight read: %v", c)
	}
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	if !g.closed.Load() {
		t.Fatal("backend not closed after removal")
	}

	// The host sees the change and gets Invalid Namespace from now on.
	page, st := h.getLog(nvme.LogChangedNS, 4096, 0)
	if st != 0 || le32(page, 0) != 2 {
		t.Fatalf("changed namespace log: status %v first %d", st, le32(page, 0))
	}
	list, _ := h.identify(nvme.CNSActiveNSList, 0)
	if le32(list, 0) != 1 || le32(list, 4) != 0 {
		t.Fatalf("active namespaces %d %d, want only 1", le32(list, 0), le32(list, 4))
	}
	if st := h.rw(nvme.IORead, 2, 0, 1, make([]byte, 512), false); st != nvme.StatusInvalidNamespace|nvme.DNR {
		t.Fatalf("read of removed namespace: %v", st)
	}
	if st := h.rw(nvme.IORead, 1, 0, 1, make([]byte, 512), false); st != 0 {
		t.Fatalf("read of remaining namespace: %v", st)
	}
	if err := s.RemoveNamespace(2); err == nil {
		t.Fatal("removing a namespace twice succeeded")
	}
}

func TestSetHostsDisconnectsOnlyRevokedHosts(t *testing.T) {
	tg, p, _ := testTarget(t)
	s := tg.Subsystem(testNQN)
	h := connect(t, tg, p, testNQN)
	s.SetHosts(false, []string{testHost})
	if h.admin.Disconnected() {
		t.Fatal("an allowed host was disconnected")
	}
	if st := h.rw(nvme.IORead, 1, 0, 1, make([]byte, 512), false); st != 0 {
		t.Fatalf("read after host list change: %v", st)
	}
	s.SetHosts(false, []string{"nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000002"})
	if !h.admin.Disconnected() || !h.io.Disconnected() {
		t.Fatal("a host no longer allowed kept its queues")
	}
	if len(s.Controllers()) != 0 {
		t.Fatal("controller of a revoked host still listed")
	}
}

func TestRemoveSubsystemAndPort(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	d := connect(t, tg, p, nvme.DiscoveryNQN)
	aen := enableAEN(t, d, nvme.OAESDiscoveryChange)
	if err := tg.RemoveSubsystem(testNQN); err != nil {
		t.Fatal(err)
	}
	if !h.admin.Disconnected() {
		t.Fatal("controller of a removed subsystem still connected")
	}
	if rsp := <-aen; rsp == nil || rsp.Result() != nvme.AsyncTypeNotice|uint64(nvme.AsyncNoticeDiscoveryLog)<<8|uint64(nvme.LogDiscovery)<<16 {
		t.Fatalf("discovery AER completion %v", rsp)
	}
	page, st := d.getLog(nvme.LogDiscovery, 4096, 0)
	if st != 0 {
		t.Fatal(st)
	}
	// Only the current discovery subsystem's entry remains.
	if n := le32(page, 8); n != 1 {
		t.Fatalf("discovery log has %d records, want 1", n)
	}
	if tg.Subsystem(testNQN) != nil || tg.RemoveSubsystem(testNQN) == nil {
		t.Fatal("removed subsystem still there")
	}
	if err := tg.RemovePort(p.ID); err != nil {
		t.Fatal(err)
	}
	if !d.admin.Disconnected() {
		t.Fatal("discovery controller on a removed port still connected")
	}
	if tg.RemovePort(p.ID) == nil {
		t.Fatal("removing a port twice succeeded")
	}
}

// Removing a subsystem disconnects its hosts at once, but a backend call
// they started keeps its backend open until it returns.
func TestRemoveSubsystemWaitsForBackendCalls(t *testing.T) {
	tg, p, _ := testTarget(t)
	g := newGateBackend()
	addNamespace(t, tg, 2, g)
	h := connect(t, tg, p, testNQN)
	rd := newCmd(nvme.IORead)
	rd.SetNSID(2)
	keyed(rd, 512)
	h.io.SubmitAsync(rd, make([]byte, 512))
	<-g.entered // the read is in the backend
	removed := make(chan error, 1)
	go func() { removed <- tg.RemoveSubsystem(testNQN) }()
	select {
	case <-h.admin.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("host still connected to a removed subsystem after 5 s")
	}
	if g.closed.Load() {
		t.Fatal("backend closed under a running read")
	}
	close(g.gate)
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	if !g.closed.Load() {
		t.Fatal("backend not closed")
	}
}

// resizableMem is a memory backend that can grow.
type resizableMem struct{ *memBackend }

func (r resizableMem) Resize(size int64) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if size > int64(len(r.data)) {
		r.data = append(r.data, make([]byte, size-int64(len(r.data)))...)
	}
	r.data = r.data[:size]
	return size, nil
}

func TestResizeNamespaceWhileConnected(t *testing.T) {
	tg, p, _ := testTarget(t)
	s := tg.Subsystem(testNQN)
	mem := resizableMem{newMem(1<<20, 512)}
	ns := addNamespace(t, tg, 2, mem)
	h := connect(t, tg, p, testNQN)
	aen := enableAEN(t, h, nvme.OAESNSAttrChanged)
	beyond := uint64(1<<20) / 512 // the first block past the old end
	if st := h.rw(nvme.IORead, 2, beyond, 1, make([]byte, 512), false); st != nvme.StatusLBARange|nvme.DNR {
		t.Fatalf("read past the end: %v", st)
	}
	changed, err := s.ResizeNamespace(2, 2<<20)
	if err != nil || !changed {
		t.Fatalf("resize: %v %v", changed, err)
	}
	if rsp := <-aen; rsp == nil || rsp.Result() != nvme.AsyncTypeNotice|uint64(nvme.LogChangedNS)<<16 {
		t.Fatalf("AER completion %v", rsp)
	}
	id, st := h.identify(nvme.CNSNamespace, 2)
	if st != 0 || binary.LittleEndian.Uint64(id[0:]) != 4096 {
		t.Fatalf("NSZE after resize: %d (%v), want 4096", binary.LittleEndian.Uint64(id[0:]), st)
	}
	if st := h.rw(nvme.IOWrite, 2, beyond, 1, make([]byte, 512), false); st != 0 {
		t.Fatalf("write to the grown part: %v", st)
	}
	if s.Namespace(2) != ns {
		t.Fatal("resizing replaced the namespace")
	}
	if changed, err := s.ResizeNamespace(2, 2<<20); err != nil || changed {
		t.Fatalf("resize to the same size: %v %v", changed, err)
	}
	if _, err := s.ResizeNamespace(1, 4<<20); err == nil {
		t.Fatal("resizing a backend that cannot change size succeeded")
	}
}
