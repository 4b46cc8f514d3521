package fabrics

import (
	"errors"
	"io"
	"slices"
	"time"

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
	ns.enforceLoaded(st)
	return nil
}

// enforceLoaded publishes a state read from the store, fences the hosts
// it takes write access from, tells the other hosts what changed, and
// then tells the store the state is enforced. Called with the mutex held.
func (ns *Namespace) enforceLoaded(st ReservationState) {
	before := ns.resvCurrent()
	after := loadedSnapshot(&before, st)
	ns.publishResv(after)
	if s := ns.subsystem.Load(); s != nil {
		ns.fenceLost(s, &before, &after)
		s.resvNotify(ns.ID, loadedNotices(&before, &after))
	}
	if e, ok := ns.resv.store.(EnforcingStore); ok {
		e.Enforced()
	}
}

// EnforcingStore is a SharedReservationStore that learns when the state it
// last loaded is enforced: published, and the writes it takes access from
// out of the backend (fence.go). Until then the daemon must not tell the
// others it enforces that state.
type EnforcingStore interface {
	SharedReservationStore
	Enforced()
}

// loadedSnapshot is the snapshot of a state read from the store, after
// cur: the hosts whose write access it takes away count as preempted
// with abort, so that their commands in flight here complete as aborted,
// as on the daemon that made the change.
func loadedSnapshot(cur *resvSnapshot, st ReservationState) resvSnapshot {
	next := resvSnapshot{ReservationState: st, abortGen: cur.abortGen, aborted: cur.aborted}
	next.Registrants = slices.Clone(st.Registrants)
	var lost [][nvme.HostIDSize]byte
	for _, reg := range cur.Registrants {
		if losesWrite(cur, &next, &reg.HostID) {
			lost = append(lost, reg.HostID)
		}
	}
	if len(lost) > 0 {
		next.abortGen, next.aborted = cur.abortGen+1, lost
	}
	return next
}

// loadedNotices are the notifications a change another daemon made owes
// this daemon's controllers: a registrant that is gone was preempted, and
// one left registered whose reservation of a registrants-only or
// all-registrants type ended or changed hands hears it was released.
func loadedNotices(before, after *resvSnapshot) []resvNotice {
	var out []resvNotice
	for _, reg := range before.Registrants {
		h := reg.HostID
		switch {
		case after.registrant(&h) < 0:
			out = append(out, resvNotice{h, nvme.ResvNoticeRegPreempted})
		case before.Type != nvme.ResvNone && before.Type != nvme.ResvWriteExclusive && before.Type != nvme.ResvExclusiveAccess &&
			(after.Type != before.Type || after.Holder != before.Holder) && !after.holds(&h):
			out = append(out, resvNotice{h, nvme.ResvNoticeReleased})
		}
	}
	return out
}

// fenceLost keeps the fence (fence.go) for a change another daemon made:
// after is published; this waits until no write is in flight here from a
// host after denies the write access before gave it (a Preempt, with or
// without Abort, a Release of a registrants-only type, an Unregister),
// so that the other daemon's change does not complete while such a
// write, admitted here under the old state, can still reach the backend.
// What tells the other daemon that this one enforces the new state (the
// shared record's heartbeat, through EnforcingStore) comes after this,
// however long it takes: the other daemon's change waits for it.
func (ns *Namespace) fenceLost(s *Subsystem, before, after *resvSnapshot) {
	loses := func(c *Controller) bool { return losesWrite(before, after, &c.HostID) }
	if !ns.fence(loses, fenceTimeout) {
		s.log().WithFields(logrus.Fields{"subsystem": s.NQN, "nsid": ns.ID, "timeout": fenceTimeout}).
			Warn("another daemon's reservation change: a write admitted under the old state has not left the backend in time; this daemon does not report the change enforced until it has")
		ns.fence(loses, 365*24*time.Hour)
	}
}

// publishResv publishes next with the namespace's unavailable switch,
// which SetReservationUnavailable flips without the mutex: whichever of
// the two swaps the pointer last read the switch after the other set it.
func (ns *Namespace) publishResv(next resvSnapshot) {
	rs := &ns.resv
	for {
		cur := rs.snap.Load()
		next.unavailable, next.leased = rs.unavailable.Load(), rs.leased.Load()
		if rs.snap.CompareAndSwap(cur, &next) {
			return
		}
	}
}

// SetReservationLease says the shared state this daemon enforces holds
// until until, on the monotonic clock: a shared store calls it after
// each refresh that read the record (and enforces what it read), with the
// time the read started plus the timeout T after which the other daemon
// may count this one gone. From the first call on, I/O admitted after
// until gets ANA Inaccessible, whatever the refresher is doing: a daemon
// paused past its lease (SIGSTOP, memory pressure) does not serve the
// commands waiting in its queues under a state the other daemon may have
// changed meanwhile.
func (ns *Namespace) SetReservationLease(until time.Time) {
	rs := &ns.resv
	rs.lease.Store(int64(until.Sub(start)))
	if !rs.leased.Swap(true) {
		ns.republishFlags()
	}
}

// republishFlags publishes the current snapshot again with the switches
// (unavailable, leased) as they are now, without the mutex, which a
// change may hold while it waits: a change publishing meanwhile read them
// after they were set, and the compare-and-swap never puts back an older
// snapshot.
func (ns *Namespace) republishFlags() {
	rs := &ns.resv
	for {
		cur := rs.snap.Load()
		var next resvSnapshot
		if cur != nil {
			next = *cur
		}
		next.unavailable, next.leased = rs.unavailable.Load(), rs.leased.Load()
		if rs.snap.CompareAndSwap(cur, &next) {
			return
		}
	}
}

// ReservationLeaseExpired reports whether the namespace has a lease and
// it has ended.
func (ns *Namespace) ReservationLeaseExpired() bool {
	rs := &ns.resv
	return rs.leased.Load() && nanotime() > rs.lease.Load()
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
	ns.republishFlags()
	if on {
		ns.endRefused() // a command waiting on the QoS limit must not run on a stale state
	}
	if s := ns.subsystem.Load(); s != nil {
		s.anaChanged(ns.ID)
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
