package fabrics

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
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

// heldWrites holds every write until gate closes; entered gets a token
// per write that reached it.
type heldWrites struct {
	*memBackend
	gate    chan struct{}
	entered chan struct{}
}

func (h *heldWrites) WriteAt(p []byte, off int64) error {
	h.entered <- struct{}{}
	<-h.gate
	return h.memBackend.WriteAt(p, off)
}

func (h *heldWrites) flushCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.memBackend.flushes
}

// gatewayNamespace adds namespace 2, in ANA group 5, on b.
func gatewayNamespace(t *testing.T, tg *Target, b backend.Backend) {
	t.Helper()
	addGroupNamespace(t, tg, 2, 5, b)
}

func writeCmd(nsid uint32) nvme.Command {
	c := newCmd(nvme.IOWrite)
	c.SetNSID(nsid)
	keyed(c, 512)
	return c
}

// A group's quiesce returns only once the writes in flight on its
// namespaces have completed, and flushes them after: a handover never
// leaves a write of the old owner behind a write of the new one.
func TestQuiesceANAGroupWaitsForWrites(t *testing.T) {
	tg, p, _ := testTarget(t)
	b := &heldWrites{memBackend: newMem(1<<20, 512), gate: make(chan struct{}), entered: make(chan struct{}, 4)}
	gatewayNamespace(t, tg, b)
	h := connect(t, tg, p, testNQN)
	release := sync.OnceFunc(func() { close(b.gate) })
	t.Cleanup(release) // a failed test lets the write go before the queues close
	done := h.io.SubmitAsync(writeCmd(2), make([]byte, 512))
	<-b.entered
	if err := tg.PinANAGroup(5, nvme.ANAInaccessible); err != nil {
		t.Fatal(err)
	}
	err := tg.QuiesceANAGroup(5, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "namespace 2") {
		t.Fatalf("quiesce with a write in flight: %v, want an error naming namespace 2", err)
	}
	if n := b.flushCount(); n != 0 {
		t.Fatalf("%d flushes before the write in flight completed", n)
	}
	release()
	if c := <-done; c == nil || c.Status() != 0 {
		t.Fatalf("the write in flight: %v", c)
	}
	if err := tg.QuiesceANAGroup(5, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := b.flushCount(); n != 1 {
		t.Fatalf("%d flushes after the quiesce, want 1", n)
	}
	if st := h.rw(nvme.IOWrite, 2, 0, 1, make([]byte, 512), false); st != nvme.StatusANAInaccessible {
		t.Fatalf("a write after the quiesce: %v, want ANA Inaccessible", st)
	}
}

// A command already past the namespace lookup when its group turns
// inaccessible is either refused with the path status or waited for by
// the quiesce: it is counted in flight before its ANA check.
func TestQuiesceANAGroupCatchesCommandInPrepare(t *testing.T) {
	tg, p, _ := testTarget(t)
	b := &heldWrites{memBackend: newMem(1<<20, 512), gate: make(chan struct{}), entered: make(chan struct{}, 4)}
	close(b.gate)
	gatewayNamespace(t, tg, b)
	h := connect(t, tg, p, testNQN)
	claimed, proceed := make(chan struct{}), make(chan struct{})
	claimedHook = func(r *Request) {
		if r.ns.ID == 2 {
			claimed <- struct{}{}
			<-proceed
		}
	}
	letGo := sync.OnceFunc(func() { close(proceed) })
	t.Cleanup(func() { letGo(); claimedHook = nil })
	// The loop queue prepares a command on the submitter's goroutine.
	done := make(chan nvme.Completion, 1)
	go func() {
		c, _ := h.io.Submit(writeCmd(2), make([]byte, 512))
		done <- c
	}()
	<-claimed // the write is in prepare, its group still optimized
	if err := tg.PinANAGroup(5, nvme.ANAInaccessible); err != nil {
		t.Fatal(err)
	}
	if err := tg.QuiesceANAGroup(5, 50*time.Millisecond); err == nil {
		t.Fatal("quiesce returned with a command in prepare uncounted")
	}
	letGo()
	if c := <-done; c == nil || c.Status() != nvme.StatusANAInaccessible {
		t.Fatalf("the write in prepare when its group turned inaccessible: %v, want ANA Inaccessible", c)
	}
	if len(b.entered) != 0 {
		t.Fatal("the write reached the backend after its group turned inaccessible")
	}
	if err := tg.QuiesceANAGroup(5, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// failingMem fails every write with err.
type failingMem struct {
	*memBackend
	err error
}

func (f failingMem) WriteAt([]byte, int64) error { return f.err }

func addGroupNamespace(t *testing.T, tg *Target, nsid, group uint32, b backend.Backend) {
	t.Helper()
	ns, err := NewNamespace(nsid, b, false, [16]byte{byte(nsid)})
	if err == nil {
		err = ns.SetANAGroup(group)
	}
	if err == nil {
		err = tg.Subsystem(testNQN).AddNamespace(ns)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// In a gateway (pinned) group, a cluster out of reach or a fenced client
// fails I/O with an ANA path status, so that the host's multipath moves it
// to the group's new owner: ANA Transition while the group is still
// optimized here, its state's status once the step down is done; a fenced
// client (ESHUTDOWN) steps the gateway down. Elsewhere the same errors are
// Namespace Not Ready, which the host retries on the same path.
func TestGatewayGroupClusterErrorsArePathErrors(t *testing.T) {
	tg, p, _ := testTarget(t)
	async := &asyncMem{memBackend: newMem(1<<20, 512), inFlight: make(chan int, 4)}
	addGroupNamespace(t, tg, 2, 5, async)
	addGroupNamespace(t, tg, 3, 5, failingMem{newMem(1<<20, 512), syscall.ETIMEDOUT})
	addGroupNamespace(t, tg, 4, 6, failingMem{newMem(1<<20, 512), syscall.ESHUTDOWN})
	fenced := make(chan uint32, 4)
	tg.SetFencedHook(func(g uint32) { fenced <- g })
	if err := tg.PinANAGroup(5, nvme.ANAOptimized); err != nil {
		t.Fatal(err)
	}
	h := connect(t, tg, p, testNQN)
	write := func(nsid uint32) <-chan nvme.Completion {
		return h.io.SubmitAsync(ioCmd(nvme.IOWrite, nsid, 0, 1, 512), make([]byte, 512))
	}
	status := func(rsp <-chan nvme.Completion) nvme.Status {
		c := <-rsp
		if c == nil {
			t.Fatal("no completion")
		}
		return c.Status()
	}

	// Fenced, asynchronous: the step down is asked for, the group is still
	// optimized here.
	async.fail = -int64(syscall.ESHUTDOWN)
	if st := status(write(2)); st != nvme.StatusANATransition {
		t.Fatalf("fenced write: %v, want ANA Transition", st)
	}
	if g := <-fenced; g != 5 {
		t.Fatalf("step down asked for group %d", g)
	}
	// Timed out, synchronous: a path error too, with no step down.
	if st := status(write(3)); st != nvme.StatusANATransition {
		t.Fatalf("timed-out write: %v, want ANA Transition", st)
	}
	// Timed out while the group stepped down: ANA Inaccessible.
	async.hold = make(chan struct{})
	async.fail = -int64(syscall.ETIMEDOUT)
	rsp := write(2)
	<-async.inFlight
	<-async.inFlight // the first write's
	if err := tg.PinANAGroup(5, nvme.ANAInaccessible); err != nil {
		t.Fatal(err)
	}
	close(async.hold)
	if st := status(rsp); st != nvme.StatusANAInaccessible {
		t.Fatalf("timed-out write after the step down: %v, want ANA Inaccessible", st)
	}
	// Outside gateway groups: retryable on this path, no step down.
	if st := status(write(4)); st != nvme.StatusNamespaceNotReady {
		t.Fatalf("fenced write outside a gateway group: %v, want Namespace Not Ready", st)
	}
	select {
	case g := <-fenced:
		t.Fatalf("step down asked for group %d without a fenced client in it", g)
	default:
	}
}

// readTimingOut fails every read as librados does past its op timeout.
type readTimingOut struct{ *memBackend }

func (readTimingOut) ReadAt([]byte, int64) error { return syscall.ETIMEDOUT }

// In a gateway group, the two commands that reach the cluster outside a
// read or write fail over too: a fused Compare whose read times out, and
// a reservation change whose store finds the client fenced, which also
// steps the gateway down. Namespace Not Ready or Internal Error would
// fail them at the host, on a path that no longer owns the group.
func TestGatewayGroupCompareAndReservationErrorsArePathErrors(t *testing.T) {
	st := &memStore{}
	tg, p := restartWith(t, st)
	ns := tg.Subsystem(testNQN).Namespace(1)
	if err := ns.SetANAGroup(5); err != nil {
		t.Fatal(err)
	}
	addGroupNamespace(t, tg, 2, 5, readTimingOut{newMem(1<<20, 512)})
	fenced := make(chan uint32, 4)
	tg.SetFencedHook(func(g uint32) { fenced <- g })
	if err := tg.PinANAGroup(5, nvme.ANAOptimized); err != nil {
		t.Fatal(err)
	}
	h := resvHost(t, tg, p, 1)
	c := ioCmd(nvme.IOCompare, 2, 0, 1, 512)
	c.SetFlags(c.Flags() | nvme.FuseFirst)
	c.SetCID(1000)
	first := h.io.SubmitAsync(c, make([]byte, 512))
	w := ioCmd(nvme.IOWrite, 2, 0, 1, 512)
	w.SetFlags(w.Flags() | nvme.FuseSecond)
	w.SetCID(1001)
	second := h.io.SubmitAsync(w, make([]byte, 512))
	if rsp := <-first; rsp == nil || rsp.Status() != nvme.StatusANATransition {
		t.Fatalf("a compare whose read timed out: %v, want ANA Transition", rsp)
	}
	if rsp := <-second; rsp == nil || rsp.Status() != nvme.StatusFusedFail {
		t.Fatalf("its write: %v, want Fused Failed", rsp)
	}
	st.fail = fmt.Errorf("set image metadata: %w", syscall.ESHUTDOWN)
	wantStatus(t, "a register whose store finds the client fenced", h.resvRegister(nvme.ResvRegister, false, nvme.CPTPLSet, 0, 1), nvme.StatusANATransition)
	select {
	case g := <-fenced:
		if g != 5 {
			t.Fatalf("step down asked for group %d", g)
		}
	default:
		t.Fatal("a store that found the client fenced did not step the gateway down")
	}
}

// ANAGroupNamespaces names the group's namespaces only, sorted, each by
// its subsystem, NSID and UUID; a namespace added to the group shows.
func TestANAGroupNamespaces(t *testing.T) {
	tg, _, _ := testTarget(t)
	addGroupNamespace(t, tg, 3, 5, newMem(1<<20, 512))
	addGroupNamespace(t, tg, 2, 5, newMem(1<<20, 512))
	addGroupNamespace(t, tg, 4, 6, newMem(1<<20, 512))
	want := []string{
		testNQN + " 2 02000000000000000000000000000000",
		testNQN + " 3 03000000000000000000000000000000",
	}
	if got := tg.ANAGroupNamespaces(5); !slices.Equal(got, want) {
		t.Fatalf("group 5: %q, want %q", got, want)
	}
	if got := tg.ANAGroupNamespaces(7); len(got) != 0 {
		t.Fatalf("group 7, empty: %q", got)
	}
}
