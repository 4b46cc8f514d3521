package fabrics

import (
	"errors"
	"io"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
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
	before := rs.snap.Load()
	ns.publishLoaded(st)
	ns.fenceLost(before, rs.snap.Load())
	return nil
}

// fenceLost waits until no command is in flight on the namespace from a
// connected host that after denies the access before gave it: another
// daemon changed the state (a Preempt, with or without Abort, a Release
// of a registrants-only type, an Unregister), and its change must not
// complete while such a command, admitted here under the old state, can
// still reach the backend. Whatever tells the other daemon that this one
// enforces the new state (the shared record's heartbeat) comes after the
// reload, and so after this. Commands admitted under the new state see it
// at once: the snapshot is published first.
func (ns *Namespace) fenceLost(before, after *resvSnapshot) {
	s := ns.subsystem.Load()
	if s == nil || after == nil {
		return
	}
	var lost [][nvme.HostIDSize]byte
	for _, c := range s.Controllers() {
		h := c.HostID
		if slices.Contains(lost, h) {
			continue
		}
		for _, write := range []bool{false, true} {
			if (before == nil || !before.conflicts(&h, write)) && after.conflicts(&h, write) {
				lost = append(lost, h)
				break
			}
		}
	}
	if len(lost) > 0 && !s.resvFence(ns, lost) {
		// Nothing more to do than say so: the command cannot be called
		// back from the backend, and the new state already holds here.
		s.log().WithFields(logrus.Fields{"subsystem": s.NQN, "nsid": ns.ID, "timeout": resvFenceTimeout}).
			Warn("another daemon's reservation change: a command admitted under the old state has not left the backend in time, and may land after the change completes")
	}
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
	ns.publishResv(next)
}

// publishResv publishes next with the namespace's unavailable switch,
// which SetReservationUnavailable flips without the mutex: whichever of
// the two swaps the pointer last read the switch after the other set it.
func (ns *Namespace) publishResv(next resvSnapshot) {
	rs := &ns.resv
	for {
		cur := rs.snap.Load()
		next.unavailable = rs.unavailable.Load()
		if rs.snap.CompareAndSwap(cur, &next) {
			return
		}
	}
}

// SetReservationUnavailable turns the namespace's I/O and reservation
// commands away with ANA Inaccessible, a path error the host retries on
// another path, or lets them through again. A daemon that cannot read the
// shared reservation state sets it: the state it enforces may be stale.
// The ANA log reports the namespace's group inaccessible meanwhile, and
// each flip raises an ANA change event, so the Linux host stops choosing
// this path rather than meeting the error on every command (and, unlike
// the change state, the inaccessible one does not make it reset the
// controller after twice ANATT). It does not wait for a reservation
// command in progress.
func (ns *Namespace) SetReservationUnavailable(on bool) {
	rs := &ns.resv
	if rs.unavailable.Swap(on) == on {
		return
	}
	for {
		cur := rs.snap.Load()
		var next resvSnapshot
		if cur != nil {
			next = *cur
		}
		next.unavailable = rs.unavailable.Load()
		if rs.snap.CompareAndSwap(cur, &next) {
			break
		}
	}
	if s := ns.subsystem.Load(); s != nil {
		s.anaChanged()
	}
}

// ReservationShared reports whether the namespace's reservation store is
// one other daemons write too (SharedReservationStore). It does not wait
// behind a reservation change, which may be waiting on the other daemon.
func (ns *Namespace) ReservationShared() bool { return ns.resv.shared.Load() }

// ReservationUnavailable reports what SetReservationUnavailable set.
func (ns *Namespace) ReservationUnavailable() bool { return ns.resv.unavailable.Load() }

// TryReloadReservation is ReloadReservation unless a reservation change
// is running (it holds the namespace's mutex, maybe waiting on another
// daemon): it then reports false and does nothing, and the change itself
// learns the new state from its store.
func (ns *Namespace) TryReloadReservation() (bool, error) {
	rs := &ns.resv
	if !rs.mu.TryLock() {
		return false, nil
	}
	defer rs.mu.Unlock()
	return true, ns.reloadLocked()
}

// CloseReservationStore closes the namespace's store if it is an
// io.Closer (a shared store stops refreshing), before its backend closes.
func (ns *Namespace) CloseReservationStore(log *logrus.Entry) {
	ns.resv.mu.Lock()
	c, ok := ns.resv.store.(io.Closer)
	ns.resv.mu.Unlock()
	if !ok {
		return
	}
	if err := c.Close(); err != nil {
		log.WithError(err).Warn("closing the namespace's reservation store")
	}
}
