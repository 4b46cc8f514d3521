package fabrics

import (
	"errors"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// failingLoad is a shared store that cannot be read.
type failingLoad struct{ sharedView }

func (f *failingLoad) Load() (ReservationState, error) {
	return ReservationState{}, errors.New("cluster unreachable")
}

// A takeover's reload publishes what the group's namespaces' stores hold
// now, and reads no other group's; a store that cannot be read is an
// error naming its namespace.
func TestReloadANAGroupReservations(t *testing.T) {
	m := &sharedMedium{}
	tg, p := restartWith(t, &sharedView{m: m})
	other, err := NewNamespace(2, newMem(1<<20, 512), false, [16]byte{2})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.SetANAGroup(2); err != nil {
		t.Fatal(err)
	}
	if err := other.SetReservationStore(&failingLoad{sharedView{m: &sharedMedium{}}}); err == nil {
		t.Fatal("a failing load set up")
	}
	if err := tg.Subsystem(testNQN).AddNamespace(other); err != nil {
		t.Fatal(err)
	}

	// Another daemon stores a reservation while this one stands by.
	held := ReservationState{Generation: 1, Type: nvme.ResvWriteExclusive, Holder: [16]byte{1},
		Registrants: []Registrant{{HostID: [16]byte{1}, Key: 0xa}}}
	peer := &sharedView{m: m}
	peer.Load()
	if err := peer.Store(held); err != nil {
		t.Fatal(err)
	}
	b := resvHost(t, tg, p, 2)
	blk := make([]byte, 512)
	if st := b.rw(nvme.IOWrite, 1, 0, 1, blk, false); st != 0 {
		t.Fatalf("before the reload, b's write: %v (the state loaded at start has no reservation)", st)
	}
	if err := tg.ReloadANAGroupReservations(1); err != nil {
		t.Fatalf("group 1: %v", err)
	}
	wantStatus(t, "b's write after the reload", b.rw(nvme.IOWrite, 1, 0, 1, blk, false), conflict)

	err = tg.ReloadANAGroupReservations(2)
	if err == nil || !strings.Contains(err.Error(), "namespace 2") || !strings.Contains(err.Error(), "cluster unreachable") {
		t.Fatalf("group 2 with an unreadable store: %v", err)
	}
}
