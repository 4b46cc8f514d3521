package fabrics

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

// Reservations (NVMe Base 2.0 section 8.19): per namespace, hosts register
// a key, and one of them (every registrant, for the all-registrants types)
// holds a reservation that limits what the others' I/O may do. A host is
// its 128-bit Host Identifier from Connect: every controller of one host
// shares its registration.
//
// The I/O path reads an immutable snapshot through one atomic pointer:
// nil, or a snapshot without a reservation, lets every command through
// after one load and a compare. Reservation commands build the next
// snapshot under the namespace's own mutex, which no I/O takes, persist it
// (off the poller) and publish it.

// ReservationState is what a namespace's reservation is: what Report
// shows and what a ReservationStore keeps.
type ReservationState struct {
	Generation  uint32
	Type        uint8    // 0: no reservation
	Holder      [16]byte // the holding host, for types 1-4
	PTPL        bool     // persist through power loss
	Registrants []Registrant
}

// Registrant is one registered host.
type Registrant struct {
	HostID [nvme.HostIDSize]byte
	Key    uint64
}

// ReservationStore keeps a namespace's reservation state across restarts.
// Store is called before the command that changed the state completes,
// off the poller; a failed Store fails the command and leaves the state
// as it was. Load returns the zero state when nothing was stored.
type ReservationStore interface {
	Load() (ReservationState, error)
	Store(ReservationState) error
}

// resvSnapshot is one published state, never changed once published.
type resvSnapshot struct {
	ReservationState
	// abortGen changes with every Preempt and Abort; aborted are the
	// hosts the last one preempted: their commands that were in flight
	// complete with Command Aborted due to Preempt and Abort.
	abortGen uint32
	aborted  [][nvme.HostIDSize]byte
	// pending is the state a change is fencing for (fence.go): until it
	// is stored and published, a command must be allowed by both.
	pending *resvSnapshot
	// unavailable: the daemon cannot read the shared state, which may
	// have changed (SetReservationUnavailable); I/O gets a path error.
	unavailable bool
	// leased: the state holds only until the namespace's lease ends
	// (SetReservationLease); admission reads the clock.
	leased bool
}

// reservations is a namespace's reservation engine.
type reservations struct {
	snap     atomic.Pointer[resvSnapshot] // nil: never registered
	disabled atomic.Bool                  // reservation commands answer Invalid Opcode
	mu       sync.Mutex                   // serializes reservation commands and features (held through a fence)
	store    ReservationStore
	// persistent: store is set, read without mu by Identify and the
	// command checks, which must not wait behind a fence.
	persistent atomic.Bool
	shared     atomic.Bool // store is a SharedReservationStore, read as persistent
	// unavailable: SetReservationUnavailable's switch, copied into every
	// snapshot published (publishResv).
	unavailable atomic.Bool
	// lease is when the shared state last read stops holding (nanotime),
	// and leased whether a store renews it (SetReservationLease).
	lease  atomic.Int64
	leased atomic.Bool
}

func (s *resvSnapshot) registrant(host *[nvme.HostIDSize]byte) int {
	for i := range s.Registrants {
		if s.Registrants[i].HostID == *host {
			return i
		}
	}
	return -1
}

// holds reports whether host holds the reservation.
func (s *resvSnapshot) holds(host *[nvme.HostIDSize]byte) bool {
	if s.Type == nvme.ResvNone {
		return false
	}
	if nvme.ResvAllRegistrants(s.Type) {
		return s.registrant(host) >= 0
	}
	return s.Holder == *host
}

// conflicts applies the access table of the reservation types to a
// command of host: write is the write class (Write, Write Zeroes, Dataset
// Management, Flush), otherwise the read class (Read, Compare).
func (s *resvSnapshot) conflicts(host *[nvme.HostIDSize]byte, write bool) bool {
	switch s.Type {
	case nvme.ResvWriteExclusive:
		return write && s.Holder != *host
	case nvme.ResvExclusiveAccess:
		return s.Holder != *host
	case nvme.ResvWriteExclusiveRegOnly, nvme.ResvWriteExclusiveAllRegs:
		return write && s.registrant(host) < 0
	case nvme.ResvExclusiveAccessRegOnly, nvme.ResvExclusiveAccessAllRegs:
		return s.registrant(host) < 0
	}
	return false
}

// resvCheck is the per-I/O check: Reservation Conflict, or 0. It records
// which Preempt and Abort the command started after.
func (q *Queue) resvCheck(r *Request, ns *Namespace, write bool) nvme.Status {
	s := ns.resv.snap.Load()
	if s == nil {
		return 0
	}
	if s.unavailable || s.leased && nanotime() > ns.resv.lease.Load() {
		return nvme.StatusANAInaccessible
	}
	h := &q.ctrl.HostID
	if s.Type != nvme.ResvNone && s.conflicts(h, write) || s.pending != nil && s.pending.conflicts(h, write) {
		return nvme.StatusReservationConflict | nvme.DNR
	}
	r.resvGen, r.resvSeen = s.abortGen, true
	return 0
}

// resvAborted turns the completion of a command that was in flight when
// its host was preempted with abort (s is newer than the command's check)
// into Command Aborted due to Preempt and Abort. The command did run, and
// left the backend before the Preempt and Abort completed (the fence):
// the host learns that it was fenced, and must not retry.
func (q *Queue) resvAborted(r *Request, s *resvSnapshot) {
	if slices.Contains(s.aborted, q.ctrl.HostID) {
		r.status = nvme.StatusPreemptAborted | nvme.DNR
	}
}

// prepareResv admits a reservation command: they run on the poller (the
// changes then move off it), unless the namespace has reservations off.
func prepareResv(r *Request, ns *Namespace) nvme.Status {
	if ns.resv.disabled.Load() {
		return nvme.StatusInvalidOpcode | nvme.DNR
	}
	if s := ns.resv.snap.Load(); s != nil && s.unavailable {
		return nvme.StatusANAInaccessible
	}
	r.blocking = false
	return 0
}

// SetReservations turns the reservation commands on or off. Off, they
// answer Invalid Opcode and the live state is dropped, so that no
// reservation restricts I/O. On again, the state the store holds (one
// that persists, or a shared one) is read back and enforced, with the
// fence (fence.go) for the hosts it takes write access from: a change
// made meanwhile on a store other daemons share is never overwritten
// with an empty state. An error is the store's; the commands stay off.
func (ns *Namespace) SetReservations(on bool) error {
	rs := &ns.resv
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !on {
		rs.disabled.Store(true)
		rs.snap.Store(nil)
		return nil
	}
	if !rs.disabled.Load() {
		return nil
	}
	rs.disabled.Store(false)
	if rs.store == nil {
		return nil
	}
	st, err := rs.store.Load()
	if err != nil {
		rs.disabled.Store(true)
		return fmt.Errorf("namespace %d: reading the reservation state: %w", ns.ID, err)
	}
	if !rs.restores(&st) {
		return nil // a state that does not persist ended when they went off
	}
	ns.enforceLoaded(st)
	return nil
}

// ReservationsEnabled reports what SetReservations set.
func (ns *Namespace) ReservationsEnabled() bool { return !ns.resv.disabled.Load() }

// ReservationPersistent reports whether the namespace has a store, so
// that PTPL can be set.
func (ns *Namespace) ReservationPersistent() bool { return ns.resv.persistent.Load() }

// SetReservationStore gives the namespace a store and restores what it
// holds, if the state persists through power loss; a state without PTPL
// is not restored (a restart clears it). Call before publishing ns.
func (ns *Namespace) SetReservationStore(st ReservationStore) error {
	ns.resv.mu.Lock()
	defer ns.resv.mu.Unlock()
	ns.resv.store = st
	ns.resv.persistent.Store(st != nil)
	ns.resv.shared.Store(isShared(st))
	if st == nil {
		return nil
	}
	state, err := st.Load()
	if err != nil {
		return err
	}
	if ns.resv.restores(&state) {
		ns.publishResv(resvSnapshot{ReservationState: state})
	}
	return nil
}

// Reservation returns a copy of the namespace's reservation state.
func (ns *Namespace) Reservation() ReservationState {
	s := ns.resv.snap.Load()
	if s == nil {
		return ReservationState{}
	}
	st := s.ReservationState
	st.Registrants = slices.Clone(st.Registrants)
	return st
}

// resvChange is what a reservation command did, for the engine to publish.
type resvChange struct {
	next      resvSnapshot
	notices   []resvNotice
	abort     [][nvme.HostIDSize]byte // hosts preempted with abort
	unchanged bool                    // nothing to store or publish
}

// resvNotice is a notification for every controller of host.
type resvNotice struct {
	host [nvme.HostIDSize]byte
	typ  uint8
}

// resvCurrent is the state a command starts from: a private copy.
func (ns *Namespace) resvCurrent() resvSnapshot {
	s := ns.resv.snap.Load()
	if s == nil {
		return resvSnapshot{}
	}
	next := *s
	next.Registrants = slices.Clone(s.Registrants)
	next.aborted = slices.Clone(s.aborted)
	return next
}

// notifyOthers queues a notice for every registrant but self.
func (ch *resvChange) notifyOthers(from []Registrant, self *[nvme.HostIDSize]byte, typ uint8) {
	for _, reg := range from {
		if reg.HostID != *self {
			ch.notices = append(ch.notices, resvNotice{reg.HostID, typ})
		}
	}
}

// unregister removes registrant i; a holder leaving releases the
// reservation (of an all-registrants type, only the last one does).
func (ch *resvChange) unregister(i int) {
	s := &ch.next
	reg := s.Registrants[i]
	s.Registrants = slices.Delete(s.Registrants, i, i+1)
	switch {
	case s.Type == nvme.ResvNone:
	case nvme.ResvAllRegistrants(s.Type):
		if len(s.Registrants) == 0 {
			s.Type = nvme.ResvNone
		}
	case s.Holder == reg.HostID:
		if s.Type == nvme.ResvWriteExclusiveRegOnly || s.Type == nvme.ResvExclusiveAccessRegOnly {
			ch.notifyOthers(s.Registrants, &reg.HostID, nvme.ResvNoticeReleased)
		}
		s.Type, s.Holder = nvme.ResvNone, [16]byte{}
	}
}

// preemptKey unregisters every registrant with key but self, each told
// its registration was preempted; with abort, their commands in flight
// are fenced. It reports whether any registrant had the key.
func (ch *resvChange) preemptKey(key uint64, self *[nvme.HostIDSize]byte, abort bool, all bool) bool {
	found := false
	for i := 0; i < len(ch.next.Registrants); {
		reg := ch.next.Registrants[i]
		if (!all && reg.Key != key) || reg.HostID == *self {
			if reg.Key == key {
				found = true
			}
			i++
			continue
		}
		found = true
		ch.unregister(i)
		ch.notices = append(ch.notices, resvNotice{reg.HostID, nvme.ResvNoticeRegPreempted})
		if abort {
			ch.abort = append(ch.abort, reg.HostID)
		}
	}
	return found
}

// holderKey is the key of the holder of a type 1-4 reservation.
func (s *resvSnapshot) holderKey() uint64 {
	if i := s.registrant(&s.Holder); i >= 0 {
		return s.Registrants[i].Key
	}
	return 0
}

// resvRegister runs Reservation Register for host.
func resvRegister(cur resvSnapshot, host *[nvme.HostIDSize]byte, action uint8, iekey bool, k nvme.ResvKeys) (resvChange, nvme.Status) {
	ch := resvChange{next: cur}
	s := &ch.next
	i := s.registrant(host)
	switch action {
	case nvme.ResvRegister:
		if i >= 0 {
			if s.Registrants[i].Key != k.Other {
				return ch, nvme.StatusReservationConflict | nvme.DNR
			}
			break
		}
		s.Registrants = append(s.Registrants, Registrant{HostID: *host, Key: k.Other})
		s.aborted = slices.DeleteFunc(s.aborted, func(h [16]byte) bool { return h == *host })
	case nvme.ResvUnregister:
		if i < 0 || (!iekey && s.Registrants[i].Key != k.Current) {
			return ch, nvme.StatusReservationConflict | nvme.DNR
		}
		ch.unregister(i)
	case nvme.ResvReplace:
		switch {
		case i >= 0 && !iekey && s.Registrants[i].Key != k.Current:
			return ch, nvme.StatusReservationConflict | nvme.DNR
		case i >= 0:
			s.Registrants[i].Key = k.Other
		case iekey:
			// Replace ignoring the key registers a host that was not.
			s.Registrants = append(s.Registrants, Registrant{HostID: *host, Key: k.Other})
			s.aborted = slices.DeleteFunc(s.aborted, func(h [16]byte) bool { return h == *host })
		default:
			return ch, nvme.StatusReservationConflict | nvme.DNR
		}
	default:
		return ch, nvme.StatusInvalidField | nvme.DNR
	}
	s.Generation++
	return ch, 0
}

// changeByRegistrant starts a change of cur by host, which must be
// registered with key: Reservation Conflict otherwise.
func changeByRegistrant(cur resvSnapshot, host *[nvme.HostIDSize]byte, key uint64) (resvChange, nvme.Status) {
	ch := resvChange{next: cur}
	if i := ch.next.registrant(host); i < 0 || ch.next.Registrants[i].Key != key {
		return ch, nvme.StatusReservationConflict | nvme.DNR
	}
	return ch, 0
}

// resvAcquire runs Reservation Acquire for host, registered with key k.Current.
func resvAcquire(cur resvSnapshot, host *[nvme.HostIDSize]byte, action, rtype uint8, k nvme.ResvKeys) (resvChange, nvme.Status) {
	ch, st := changeByRegistrant(cur, host, k.Current)
	if st != 0 {
		return ch, st
	}
	s := &ch.next
	switch action {
	case nvme.ResvAcquire:
		switch {
		case s.Type == nvme.ResvNone:
			s.Type, s.Holder = rtype, *host
		case s.holds(host) && s.Type == rtype:
			ch.unchanged = true
		default:
			return ch, nvme.StatusReservationConflict | nvme.DNR
		}
		return ch, 0
	case nvme.ResvPreempt, nvme.ResvPreemptAndAbort:
		if st := ch.preempt(host, rtype, k.Other, action == nvme.ResvPreemptAndAbort); st != 0 {
			return ch, st
		}
		s.Generation++
		return ch, 0
	}
	return ch, nvme.StatusInvalidField | nvme.DNR
}

// preempt applies the preempt cases of the specification (NVMe Base 2.0,
// 8.19.7), in its order: the holder's key is tested before who the
// preemptor is, so a holder naming another key preempts that key. A
// holder naming 0, which the specification refuses, changes its
// reservation's type, as the Linux target does and blktests nvme/054
// expects: no one loses anything a holder naming its own key would not
// take, so leniency here costs nothing.
func (ch *resvChange) preempt(host *[nvme.HostIDSize]byte, rtype uint8, prkey uint64, abort bool) nvme.Status {
	s := &ch.next
	switch {
	case s.Type == nvme.ResvNone:
		// No reservation: the registrants with PRKEY go.
		return ch.preemptOnly(host, prkey, abort)
	case nvme.ResvAllRegistrants(s.Type) && prkey == 0:
		// Every registrant but the preemptor goes; it holds the new type.
		ch.preemptKey(0, host, abort, true)
		s.Type, s.Holder = rtype, *host
	case nvme.ResvAllRegistrants(s.Type):
		// The registrants with PRKEY go; the reservation stays while
		// one is left.
		return ch.preemptOnly(host, prkey, abort)
	case prkey == s.holderKey():
		// The holder's key: the other registrants with it go and the
		// preemptor holds a new reservation of type rtype. A holder
		// naming its own key keeps its registration and changes the
		// type. Holder first: the old holder leaving must not release.
		old := s.Type
		s.Holder = *host
		ch.preemptKey(prkey, host, abort, false)
		s.Type = rtype
		if old != rtype {
			ch.notifyOthers(s.Registrants, host, nvme.ResvNoticeReleased)
		}
	case prkey != 0:
		// Another key: those registrants go, the reservation stays.
		return ch.preemptOnly(host, prkey, abort)
	case s.Holder == *host:
		// The holder naming 0: the type changes, nobody goes.
		if old := s.Type; old != rtype {
			s.Type = rtype
			ch.notifyOthers(s.Registrants, host, nvme.ResvNoticeReleased)
		}
	default:
		return nvme.StatusInvalidField | nvme.DNR
	}
	return 0
}

// preemptOnly unregisters every registrant with key, the preemptor too
// when it is its own key (as the Linux target and SPDK do): Reservation
// Conflict if none has it. The preemptor is neither told nor fenced: its
// own command asked for it.
func (ch *resvChange) preemptOnly(host *[nvme.HostIDSize]byte, key uint64, abort bool) nvme.Status {
	if !ch.preemptKey(key, host, abort, false) {
		return nvme.StatusReservationConflict | nvme.DNR
	}
	if i := ch.next.registrant(host); i >= 0 && ch.next.Registrants[i].Key == key {
		ch.unregister(i)
	}
	return 0
}

// resvRelease runs Reservation Release (or Clear) for host.
func resvRelease(cur resvSnapshot, host *[nvme.HostIDSize]byte, action, rtype uint8, k nvme.ResvKeys) (resvChange, nvme.Status) {
	ch, st := changeByRegistrant(cur, host, k.Current)
	if st != 0 {
		return ch, st
	}
	s := &ch.next
	switch action {
	case nvme.ResvRelease:
		if !s.holds(host) {
			ch.unchanged = true // nothing held: success, as specified
			return ch, 0
		}
		if s.Type != rtype {
			return ch, nvme.StatusInvalidField | nvme.DNR
		}
		if s.Type != nvme.ResvWriteExclusive && s.Type != nvme.ResvExclusiveAccess {
			ch.notifyOthers(s.Registrants, host, nvme.ResvNoticeReleased)
		}
		s.Type, s.Holder = nvme.ResvNone, [16]byte{}
	case nvme.ResvClear:
		ch.notifyOthers(s.Registrants, host, nvme.ResvNoticeResvPreempted)
		s.Type, s.Holder, s.Registrants = nvme.ResvNone, [16]byte{}, nil
		s.Generation++
	default:
		return ch, nvme.StatusInvalidField | nvme.DNR
	}
	return ch, 0
}

// resvKeys reads the command's keys from its data.
func resvKeys(r *Request) (nvme.ResvKeys, nvme.Status) {
	k, err := nvme.ParseResvKeys(r.Data)
	if err != nil {
		return k, nvme.StatusInvalidField | nvme.DNR
	}
	return k, 0
}

// execResvRegister, execResvAcquire and execResvRelease decode on the
// poller and run the change off it: a store may fsync.
func execResvRegister(q *Queue, r *Request) bool {
	k, st := resvKeys(r)
	cmd := r.Cmd
	cptpl := cmd.ResvCPTPL()
	switch {
	case st != 0:
	case cptpl == 1:
		st = nvme.StatusInvalidField | nvme.DNR
	case cptpl == nvme.CPTPLSet && !r.ns.ReservationPersistent():
		// RESCAP reports no persistence without a store.
		st = nvme.StatusInvalidField | nvme.DNR
	}
	if st != 0 {
		r.status = st
		return true
	}
	host := q.ctrl.HostID
	action, iekey := cmd.ResvAction(), cmd.ResvIEKEY()
	return q.resvRun(r, func(cur resvSnapshot) (resvChange, nvme.Status) {
		ch, st := resvRegister(cur, &host, action, iekey, k)
		switch cptpl {
		case nvme.CPTPLSet:
			ch.next.PTPL = true
		case nvme.CPTPLClear:
			ch.next.PTPL = false
		}
		return ch, st
	})
}

func execResvAcquire(q *Queue, r *Request) bool {
	k, st := resvKeys(r)
	cmd := r.Cmd
	rtype := cmd.ResvType()
	if st == 0 && (cmd.ResvIEKEY() || !nvme.ValidResvType(rtype)) {
		st = nvme.StatusInvalidField | nvme.DNR
	}
	if st != 0 {
		r.status = st
		return true
	}
	host, action := q.ctrl.HostID, cmd.ResvAction()
	return q.resvRun(r, func(cur resvSnapshot) (resvChange, nvme.Status) {
		return resvAcquire(cur, &host, action, rtype, k)
	})
}

func execResvRelease(q *Queue, r *Request) bool {
	k, st := resvKeys(r)
	cmd := r.Cmd
	if st == 0 && cmd.ResvIEKEY() {
		st = nvme.StatusInvalidField | nvme.DNR
	}
	if st != 0 {
		r.status = st
		return true
	}
	host, action, rtype := q.ctrl.HostID, cmd.ResvAction(), cmd.ResvType()
	return q.resvRun(r, func(cur resvSnapshot) (resvChange, nvme.Status) {
		return resvRelease(cur, &host, action, rtype, k)
	})
}

// execResvReport returns the Reservation Status, extended: a fabrics host
// ID is 128 bits, which the short form cannot carry, so without EDS the
// command fails with Host Identifier Inconsistent Format.
func execResvReport(q *Queue, r *Request) bool {
	if !r.Cmd.ResvReportEDS() {
		r.status = nvme.StatusHostIDInconsistent | nvme.DNR
		return true
	}
	s := r.ns.resv.snap.Load()
	if s == nil {
		s = &resvSnapshot{}
	}
	st := nvme.ResvStatus{Gen: s.Generation, Type: s.Type, PTPL: s.PTPL}
	for _, reg := range s.Registrants {
		st.Registrants = append(st.Registrants, nvme.ResvRegistrant{
			CNTLID: nvme.ResvDynamicCNTLID, Holds: s.holds(&reg.HostID), HostID: reg.HostID, Key: reg.Key})
	}
	st.Encode(r.Data, true)
	return true
}

func sizeResvReport(q *Queue, r *Request) nvme.Status { return sizeTo(r, r.Cmd.ResvReportLength()) }

// resvRun runs a reservation change off the poller and completes r.
func (q *Queue) resvRun(r *Request, change func(resvSnapshot) (resvChange, nvme.Status)) bool {
	ns := r.ns
	q.hold()
	q.target.background(func() {
		r.status = r.resvStatus(q.ctrl.Subsystem.resvApply(ns, change))
		q.completeAsync(r)
	})
	return false
}

// resvStatus is the status of a reservation change that resvApply
// finished with st, its store failing with storeErr if not nil: in a
// gateway group a cluster error is a path error, as for a write
// (pathStatus), so that the host moves the command to the group's next
// owner, and a fenced client steps the gateway down.
func (r *Request) resvStatus(st nvme.Status, storeErr error) nvme.Status {
	if storeErr != nil && ioStatus(storeErr, true) == nvme.StatusNamespaceNotReady {
		if path, ok := r.pathStatus(storeErr, true); ok {
			return path
		}
	}
	return st
}

// resvApply computes a change under the namespace's reservation mutex,
// fences the hosts it takes write access from, stores it (PTPL set, or
// just cleared, or a shared store), publishes it and sends the
// notifications. A change that cannot fence or store in time leaves the
// state as it was; a failed store's error is returned beside its status.
func (s *Subsystem) resvApply(ns *Namespace, change func(resvSnapshot) (resvChange, nvme.Status)) (nvme.Status, error) {
	rs := &ns.resv
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.disabled.Load() {
		return nvme.StatusInvalidOpcode | nvme.DNR, nil // turned off meanwhile
	}
	if rs.unavailable.Load() {
		// The shared state cannot be read: a change computed on what
		// this daemon last read could undo another daemon's.
		return nvme.StatusANAInaccessible, nil
	}
	log := s.log().WithField("nsid", ns.ID)
	var ch resvChange
	for attempt := 1; ; attempt++ {
		cur := ns.resvCurrent()
		var st nvme.Status
		ch, st = change(ns.resvCurrent()) // a copy of its own: the fence compares cur with the change

		if st != 0 || ch.unchanged {
			return st, nil
		}
		if len(ch.abort) > 0 {
			ch.next.abortGen = cur.abortGen + 1
			ch.next.aborted = ch.abort
		}
		if !s.resvFence(ns, &cur, &ch.next) {
			log.WithField("timeout", fenceTimeout).Warn("reservation change: a write of a host losing access has not left the backend in time; the change is undone and completes with Command Interrupted")
			return nvme.StatusCommandInterrupted, nil
		}
		// Stored when the new state persists, or the old one did (it
		// must not come back).
		if rs.store == nil || !rs.restores(&cur.ReservationState) && !rs.restores(&ch.next.ReservationState) {
			break
		}
		err := rs.store.Store(ch.next.ReservationState)
		if err == nil {
			break
		}
		ns.resvUndo(cur, ch.next.abortGen)
		log = log.WithError(err)
		if !errors.Is(err, ErrReservationChanged) {
			log.Error("storing the reservation state failed; the command fails and the state is unchanged")
			return nvme.StatusInternal, err
		}
		// Another daemon changed the state: the change applies to its state.
		if err := ns.reloadLocked(); err != nil {
			log.WithField("reload_error", err).Error("reading the reservation state another daemon changed failed; the command is interrupted")
			return nvme.StatusCommandInterrupted, nil
		}
		if attempt == resvChangeAttempts {
			log.Warn("the reservation state kept changing under this command; it is interrupted, and the host may retry")
			return nvme.StatusCommandInterrupted, nil
		}
	}
	ns.publishResv(ch.next)
	s.resvNotify(ns.ID, ch.notices)
	return 0, nil
}

// resvFence keeps the fence (fence.go) for a change from cur to next: when
// it takes write access from a host, it publishes cur restricted by next
// (a command must be allowed by both) and waits until the writes of those
// hosts admitted before are out of the backend. Commands of hosts next
// aborts that complete meanwhile complete as aborted. If the wait does not
// end in time, cur is published again (under next's abort generation) and
// it reports false.
func (s *Subsystem) resvFence(ns *Namespace, cur, next *resvSnapshot) bool {
	loses := func(c *Controller) bool { return losesWrite(cur, next, &c.HostID) }
	// Published even when no host connected now loses: one that
	// connects meanwhile must meet the narrower rule, or be counted.
	fencing := *cur
	fencing.pending = next
	fencing.abortGen, fencing.aborted = next.abortGen, next.aborted
	ns.publishResv(fencing)
	if ns.fence(loses, fenceTimeout) {
		return true
	}
	ns.resvUndo(*cur, next.abortGen)
	return false
}

// losesWrite reports whether host may write under before and not under
// after: the hosts a change fences.
func losesWrite(before, after *resvSnapshot, host *[nvme.HostIDSize]byte) bool {
	return !before.conflicts(host, true) && after.conflicts(host, true)
}

// restores reports whether the namespace's store keeps st, so that it
// holds again after a restart or reservations turned on again: a state
// that persists through power loss, or any state of a shared store.
func (rs *reservations) restores(st *ReservationState) bool {
	return st.PTPL || isShared(rs.store)
}

// resvUndo publishes cur again after a change that did not complete. Its
// abort generation stays gen, so that the generations a command compares
// never repeat, but no host counts as aborted.
func (ns *Namespace) resvUndo(cur resvSnapshot, gen uint32) {
	cur.pending, cur.abortGen, cur.aborted = nil, gen, nil
	ns.publishResv(cur)
}

// resvNotify queues each notice on every controller of its host that
// has not masked it for the namespace.
func (s *Subsystem) resvNotify(nsid uint32, notices []resvNotice) {
	if len(notices) == 0 {
		return
	}
	for _, c := range s.Controllers() {
		for _, n := range notices {
			if n.host == c.HostID {
				c.resvNotice(nsid, n.typ)
			}
		}
	}
}

// Reservation notifications per controller: at most resvLogMax pages
// wait; one more while full is lost, counted in the count of the last
// page the host reads, so that it sees the gap.
const resvLogMax = 64

type resvLog struct {
	pages []nvme.ResvNotice
	count uint64 // of the last page created (lost ones included)
	lost  uint64 // lost since the last page queued
	masks map[uint32]uint8
}

// resvNotice creates a page unless the host masked its type for nsid
// (Set Features Reservation Notification Mask), and raises the event
// when the log was empty.
func (c *Controller) resvNotice(nsid uint32, typ uint8) {
	if !c.sees(nsid) {
		return // the namespace is not there for the host
	}
	c.mu.Lock()
	l := &c.resv
	if l.masks[nsid]&(1<<typ) != 0 {
		c.mu.Unlock()
		return
	}
	l.count++
	if l.count == 0 {
		l.count = 1 // 0 is the empty page
	}
	if len(l.pages) == resvLogMax {
		l.lost++
		c.mu.Unlock()
		c.log.WithFields(logrus.Fields{"nsid": nsid, "type": typ}).Warn("reservation notification lost: the host has not read the log page")
		return
	}
	l.pages = append(l.pages, nvme.ResvNotice{Count: l.count, Type: typ, NSID: nsid})
	first := len(l.pages) == 1
	c.mu.Unlock()
	if first {
		c.raiseEvent(nvme.AsyncTypeIOCommandSet, nvme.AsyncIOResvLogAvailable, nvme.LogReservation)
	}
}

// resvLogPage takes the oldest page into page (ResvLogSize bytes); an
// empty log reads as zeros. The last page carries the count of the
// notifications lost after it.
func (c *Controller) resvLogPage(page []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := &c.resv
	if len(l.pages) == 0 {
		clear(page)
		return
	}
	n := l.pages[0]
	l.pages = l.pages[1:]
	if len(l.pages) == 0 {
		n.Count += l.lost
		if n.Count < l.lost {
			n.Count++ // wrapped past 0
		}
		l.lost = 0
		l.pages = nil
	}
	n.Available = uint8(min(len(l.pages), nvme.ResvNoticeMaxOutstanding))
	n.Encode(page)
}

// setResvMask sets the notification mask of nsid, or for the broadcast
// NSID of every namespace attached to the controller then (those it sees)
// that has reservations; a namespace attached later starts unmasked.
func (c *Controller) setResvMask(nsid uint32, mask uint8) {
	ids := []uint32{nsid}
	if nsid == nvme.NSIDBroadcast {
		ids = c.resvNamespaceIDs()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resv.masks == nil {
		c.resv.masks = map[uint32]uint8{}
	}
	for _, id := range ids {
		c.resv.masks[id] = mask
	}
}

// resvNamespaceIDs lists the namespaces the controller sees that have
// reservations.
func (c *Controller) resvNamespaceIDs() []uint32 {
	var ids []uint32
	for _, id := range c.visibleNamespaceIDs() {
		if ns := c.visibleNamespace(id); ns != nil && ns.ReservationsEnabled() {
			ids = append(ids, id)
		}
	}
	return ids
}

func (c *Controller) resvMask(nsid uint32) uint8 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resv.masks[nsid]
}

// dropResvNotices forgets the notifications queued for nsid, which was
// hidden from the controller.
func (c *Controller) dropResvNotices(nsid uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resv.pages = slices.DeleteFunc(c.resv.pages, func(n nvme.ResvNotice) bool { return n.NSID == nsid })
}

// resvResetLocked returns the notification state to a new controller's, at a
// controller reset. Called with c.mu held.
func (c *Controller) resvResetLocked() { c.resv = resvLog{} }

// setResvPersist sets PTPL (Set Features Reservation Persistence), off
// the poller as it stores.
func setResvPersist(q *Queue, r *Request, ns *Namespace, on bool) bool {
	if on && !ns.ReservationPersistent() {
		r.status = nvme.StatusInvalidField | nvme.DNR
		return true
	}
	q.hold()
	q.target.background(func() {
		r.status = r.resvStatus(q.ctrl.Subsystem.resvApply(ns, func(cur resvSnapshot) (resvChange, nvme.Status) {
			ch := resvChange{next: cur, unchanged: cur.PTPL == on}
			ch.next.PTPL = on
			return ch, 0
		}))
		q.completeAsync(r)
	})
	return false
}

// reservationCaps is Identify Namespace RESCAP: every type and IEKEY,
// and persistence where the namespace has a store; none with
// reservations off.
func (ns *Namespace) reservationCaps() uint8 {
	if !ns.ReservationsEnabled() {
		return 0
	}
	caps := uint8(nvme.RESCAPTypes | nvme.RESCAPIEKEY)
	if ns.ReservationPersistent() {
		caps |= nvme.RESCAPPersist
	}
	return caps
}

// resvFeatureNS is the namespace a reservation feature names, or a status:
// one hidden from the host is not there for it.
func resvFeatureNS(q *Queue, r *Request) (*Namespace, nvme.Status) {
	ns := q.ctrl.visibleNamespace(r.Cmd.NSID())
	if ns == nil {
		return nil, nvme.StatusInvalidNamespace | nvme.DNR
	}
	if !ns.ReservationsEnabled() {
		return nil, nvme.StatusInvalidField | nvme.DNR
	}
	return ns, 0
}

// setResvFeature sets Reservation Notification Mask (of one namespace, or
// every one for the broadcast NSID) or Reservation Persistence.
func setResvFeature(q *Queue, r *Request) bool {
	v := r.Cmd.FeatureValue()
	if r.Cmd.FeatureID() == nvme.FeatResvMask && r.Cmd.NSID() == nvme.NSIDBroadcast {
		q.ctrl.setResvMask(nvme.NSIDBroadcast, uint8(v)&nvme.ResvMaskAll)
		return true
	}
	ns, st := resvFeatureNS(q, r)
	if st != 0 {
		r.status = st
		return true
	}
	if r.Cmd.FeatureID() == nvme.FeatResvMask {
		q.ctrl.setResvMask(ns.ID, uint8(v)&nvme.ResvMaskAll)
		return true
	}
	return setResvPersist(q, r, ns, v&nvme.ResvPTPL != 0)
}

// getResvFeature reads them; without a namespace (NSID 0, as nvme-cli's
// walk over every feature sends) it fails with a plain Invalid Field,
// which that walk passes over, as Get Features does for every feature
// it does not have.
func getResvFeature(q *Queue, r *Request) {
	ns, st := resvFeatureNS(q, r)
	if st != 0 {
		r.status = nvme.StatusInvalidField
		return
	}
	if r.Cmd.FeatureID() == nvme.FeatResvMask {
		r.result = uint64(q.ctrl.resvMask(ns.ID))
		return
	}
	if ns.resv.snap.Load() != nil && ns.resv.snap.Load().PTPL {
		r.result = nvme.ResvPTPL
	}
}
