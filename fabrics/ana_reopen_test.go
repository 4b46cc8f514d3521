package fabrics

import (
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// reconnecting counts its reconnects.
type reconnecting struct {
	*heldWrites
	mu         sync.Mutex
	reconnects int
}

func (r *reconnecting) Reconnect() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reconnects++
	return nil
}

func (r *reconnecting) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reconnects
}

// A group's reopen waits for its commands in flight and reopens only its
// own namespaces: a write held in flight on another group's namespace
// neither delays it nor is touched.
func TestReopenANAGroupTouchesOnlyItsGroup(t *testing.T) {
	tg, p, _ := testTarget(t)
	mine := &reconnecting{heldWrites: &heldWrites{memBackend: newMem(1<<20, 512), gate: make(chan struct{}), entered: make(chan struct{}, 4)}}
	other := &reconnecting{heldWrites: &heldWrites{memBackend: newMem(1<<20, 512), gate: make(chan struct{}), entered: make(chan struct{}, 4)}}
	gatewayNamespace(t, tg, mine) // namespace 2, group 5
	addGroupNamespace(t, tg, 3, 6, other)
	h := connect(t, tg, p, testNQN)
	releaseMine, releaseOther := sync.OnceFunc(func() { close(mine.gate) }), sync.OnceFunc(func() { close(other.gate) })
	t.Cleanup(releaseMine)
	t.Cleanup(releaseOther)
	doneMine := h.io.SubmitAsync(writeCmd(2), make([]byte, 512))
	<-mine.entered
	doneOther := h.io.SubmitAsync(writeCmd(3), make([]byte, 512))
	<-other.entered
	if err := tg.PinANAGroup(5, nvme.ANAInaccessible); err != nil {
		t.Fatal(err)
	}
	err := tg.ReopenANAGroup(5, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "namespace 2") || mine.count() != 0 {
		t.Fatalf("reopen with a write in flight: %v, reconnects %d; want an error naming namespace 2 and none", err, mine.count())
	}
	releaseMine()
	if c := <-doneMine; c == nil || c.Status() != 0 {
		t.Fatalf("the write in flight: %v", c)
	}
	// Group 6's write is still held: the reopen of group 5 does not wait.
	if err := tg.ReopenANAGroup(5, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if mine.count() != 1 || other.count() != 0 {
		t.Fatalf("reconnects: group 5 %d, group 6 %d; want 1 and 0", mine.count(), other.count())
	}
	releaseOther()
	if c := <-doneOther; c == nil || c.Status() != 0 {
		t.Fatalf("group 6's write: %v", c)
	}
}

// timingOut fails every write as librados does past its op timeout, and
// reconnects.
type timingOut struct{ *memBackend }

func (timingOut) WriteAt([]byte, int64) error { return syscall.ETIMEDOUT }
func (timingOut) Reconnect() error            { return nil }

// A write of a gateway group that timed out in the cluster may still
// land: it stays in flight, so the group's quiesce refuses a clean
// release (the lease then expires and the next owner fences this client)
// until the client has been replaced, after a fence, by a reopen.
func TestTimedOutWriteKeepsQuiesceFromReleasing(t *testing.T) {
	tg, p, _ := testTarget(t)
	gatewayNamespace(t, tg, timingOut{newMem(1<<20, 512)}) // namespace 2, group 5
	if err := tg.PinANAGroup(5, nvme.ANAOptimized); err != nil {
		t.Fatal(err)
	}
	h := connect(t, tg, p, testNQN)
	if st := h.rw(nvme.IOWrite, 2, 0, 1, make([]byte, 512), false); st != nvme.StatusANATransition {
		t.Fatalf("timed-out write: %v, want ANA Transition", st)
	}
	if err := tg.PinANAGroup(5, nvme.ANAInaccessible); err != nil {
		t.Fatal(err)
	}
	err := tg.QuiesceANAGroup(5, 10*time.Second)
	if !errors.Is(err, ErrUnsettledWrites) || !strings.Contains(err.Error(), "namespace 2") {
		t.Fatalf("quiesce after a timed-out write: %v, want ErrUnsettledWrites naming namespace 2", err)
	}
	if err := tg.ReopenANAGroup(5, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := tg.QuiesceANAGroup(5, 10*time.Second); err != nil {
		t.Fatalf("quiesce on the new client: %v", err)
	}
}
