package fabrics

import (
	"errors"
	"slices"
)

// SharedReservationStore is a ReservationStore that other daemons serving
// the namespace read and write too: the shared device of an HA pair, the
// image of a gateway pair. Every change is then stored, PTPL or not, since
// the other daemon must enforce it; and one daemon's restart is not a
// power loss of the namespace, which the other went on serving, so the
// state Load returns is restored whatever its PTPL says.
type SharedReservationStore interface {
	ReservationStore
	// SharedReservations marks the store as shared; it is never called.
	SharedReservations()
}

// ErrReservationChanged is what a shared store's Store returns (wrapped)
// when another daemon changed the stored state since this one last loaded
// or stored it. The engine then reloads the state and computes the
// command's change again on it.
var ErrReservationChanged = errors.New("the reservation state was changed by another daemon")

// resvChangeAttempts bounds how often a command's change is computed
// again after ErrReservationChanged before it completes with Command
// Interrupted (the host retries).
const resvChangeAttempts = 3

func isShared(st ReservationStore) bool {
	_, ok := st.(SharedReservationStore)
	return ok
}

// ReloadReservation reads the namespace's store and publishes what it
// holds. A daemon calls it before it serves a namespace whose state other
// daemons change: a gateway taking over a group, an HA daemon refreshing
// from the shared device. Hosts this daemon fenced with Preempt and Abort
// stay fenced for their commands in flight here, until they register
// again.
func (ns *Namespace) ReloadReservation() error {
	rs := &ns.resv
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return ns.reloadLocked()
}

func (ns *Namespace) reloadLocked() error {
	rs := &ns.resv
	if rs.store == nil || rs.disabled.Load() {
		return nil
	}
	st, err := rs.store.Load()
	if err != nil {
		return err
	}
	ns.publishLoaded(st)
	return nil
}

// publishLoaded publishes a state read from the store, keeping this
// daemon's record of the hosts it fenced.
func (ns *Namespace) publishLoaded(st ReservationState) {
	next := resvSnapshot{ReservationState: st}
	if cur := ns.resv.snap.Load(); cur != nil {
		next.abortGen = cur.abortGen
		for _, h := range cur.aborted {
			if next.registrant(&h) < 0 {
				next.aborted = append(next.aborted, h)
			}
		}
	}
	next.Registrants = slices.Clone(st.Registrants)
	ns.resv.snap.Store(&next)
}
