package gateway

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// State is where a daemon stands with one group's lease.
type State int

const (
	// Standby: another daemon owns the group, or nobody yet; the group
	// is inaccessible here.
	Standby State = iota
	// Owner: this daemon holds the lease and has fenced the previous
	// owner; the group is optimized here.
	Owner
	// Blocklisted: the cluster refuses this daemon's RADOS client (a peer
	// fenced it). The group stays inaccessible until the group's client
	// is rebuilt (OpRebuild: a new client instance, which the blocklist
	// entry does not name), then stands by again.
	Blocklisted
)

func (s State) String() string {
	switch s {
	case Owner:
		return "owner"
	case Blocklisted:
		return "blocklisted"
	}
	return "standby"
}

// States lists every state, for metrics.
var States = []State{Standby, Owner, Blocklisted}

// Errors a Store returns (wrapped or not).
var (
	ErrBusy        = errors.New("the lease is held by another gateway")
	ErrLost        = errors.New("the lease is no longer ours")
	ErrBlocklisted = errors.New("this gateway's RADOS client is blocklisted")
	// ErrFenceFailed: the previous owner could not be fenced; the lock
	// was given back for another gateway to try.
	ErrFenceFailed = errors.New("fencing the previous owner failed")
	// ErrHandover: the lease object records a failback to another
	// gateway, which this one leaves the lease to (see Holder.Handover).
	ErrHandover = errors.New("the lease is being handed back to its preferred gateway")
	// ErrNotReady: the lease was taken but the group's namespaces could
	// not be made ready to serve (Runner.Ready); the lock was given back.
	ErrNotReady = errors.New("the ANA group's namespaces are not ready to serve")
)

// Holder is the owner a lease object records: the gateway's name, the lock
// cookie of its run and its RADOS client address. A failback's release
// records no owner but Handover, the preferred gateway it hands the group
// to: the other gateways leave the lease to that one for a bound
// (Lease.HonourHandover), so that a third standby cannot win it in the
// moment between the release and the preferred gateway's acquire.
// Namespaces, not recorded, is a digest of the namespaces the gateway
// serves in the group: a preferred gateway's announcement carries it, and
// an owner that serves others does not hand the group to it.
type Holder struct {
	Name, Cookie, Addr string
	Handover           string
	Namespaces         string
}

// Announcement is what a standby announcement of h records: its run's
// cookie and, after a space, its namespaces' digest.
func (h Holder) Announcement() string {
	if h.Namespaces == "" {
		return h.Cookie
	}
	return h.Cookie + " " + h.Namespaces
}

// Store is one group's lease object. Each call may block for as long as
// the cluster takes to answer (bounded by the client's timeouts).
type Store interface {
	// Lock takes the lock for the lease duration, or extends it if this
	// client and cookie hold it. With renew it must already be held:
	// ErrLost if it is not (it expired, or another took it). ErrBusy when
	// another holds it.
	Lock(renew bool) error
	// Unlock releases the lock.
	Unlock() error
	// Recorded is the holder recorded in the object; zero if none.
	Recorded() (Holder, error)
	// Record records h; the zero Holder clears the record. It applies
	// only while this client and cookie hold the lock, unexpired, in one
	// operation with the check: ErrLost otherwise, the record untouched.
	Record(h Holder) error
	// Self is this client's address as the OSDs see it.
	Self() (string, error)
	// Fence blocklists addr and waits until this client has the OSD map
	// with the entry, so that the OSDs refuse addr's writes from before
	// any write of ours.
	Fence(addr string) error
}

// Notifier is a Store that can tell the peers' stores of a release, so
// that they try at once (Lease.Poke) rather than at their next interval.
type Notifier interface {
	Notify() error
}

// Standbys is a Store on which a standby announces that it is ready to
// take the group, so that the owner can hand the group back to its
// preferred gateway (failback). The announcement is a second lock, on an
// object of the announcing gateway's own, with a short duration and its
// cookie recorded: the owner reads who stands by, and which run of it,
// without the standby ever touching the lease. A gateway that stops,
// dies or is blocklisted stops renewing it and it lapses; a restarted one
// announces a new cookie.
type Standbys interface {
	// Announce announces me as standing by, ready, for ttl.
	Announce(me Holder, ttl time.Duration) error
	// Announced is what name's unexpired announcement records
	// (Holder.Announcement), "" if none.
	Announced(name string) (announcement string, err error)
}

// Timing is a lease's timing; see DefaultTiming.
type Timing struct {
	Lease    time.Duration // the lock's duration in RADOS
	Renew    time.Duration // how often the owner renews and the others try to take it
	Deadline time.Duration // an owner that has not renewed for this long steps down
	Holdoff  time.Duration // after a release, how long this daemon leaves the lease to others
}

// DefaultTiming derives a lease's timing from its duration: renew at a
// quarter of it and step down at 70 %, so that two renewals can fail and
// the owner is still inaccessible well before the lock expires.
func DefaultTiming(lease time.Duration) Timing {
	return Timing{Lease: lease, Renew: lease / 4, Deadline: lease * 7 / 10, Holdoff: lease}
}

// Op is a step the state machine asks its driver to run against the Store.
type Op int

const (
	OpNone     Op = iota
	OpAcquire     // take the lease, fence the recorded holder, record ourselves
	OpRenew       // extend our lock
	OpRelease     // clear the record and unlock
	OpFailback    // a release that records the handover to the preferred gateway
	OpRebuild     // Blocklisted: replace the group's RADOS client and reopen its images
)

func (o Op) String() string {
	return [...]string{"none", "acquire", "renew", "release", "failback", "rebuild"}[o]
}

// Releases reports whether o gives the lease up.
func (o Op) Releases() bool { return o == OpRelease || o == OpFailback }

// Result is the outcome of an Op, reported to Done.
type Result struct {
	Op          Op
	Started     time.Duration // time the op's first lock call began
	StartedWall time.Time     // the same on Lease.Wall (zero: unset)
	Fenced      string        // OpAcquire: the address blocklisted, if any
	Err         error
	// OpRenew with a preferred gateway: Looked says the owner looked for
	// its announcement, Ready is the cookie it announced ("" none).
	Looked bool
	Ready  string
}

// Lease is one group's lease state machine. Times are durations since
// any fixed origin on a clock that goes on while the machine is suspended
// (CLOCK_BOOTTIME). It is not safe for concurrent use.
type Lease struct {
	Group  uint32
	Timing Timing
	// Wall, if set, is the wall clock: an owner also steps down once the
	// deadline has passed on it, for a paused VM, whose other clocks may
	// stand still meanwhile while the lock's clock, on the OSD, does not.
	Wall func() time.Time
	// Preferred, if set, is the gateway the group fails back to: an owner
	// that is not it hands the group over by a planned release once it has
	// seen one run of Preferred stand by, ready, for Failback (0: never).
	Preferred string
	Failback  time.Duration
	// Moves, if set, spaces out the failbacks of all the groups of this
	// gateway (balancing moves several at once when a gateway joins).
	Moves *Moves
	Name  string // this gateway's, to tell whether it is Preferred
	// Rebuild: a blocklisted lease asks for OpRebuild, first at once,
	// then after each failed one a back-off doubling from Timing.Renew up
	// to maxRebuildBackoff. Without it, blocklisted stays.
	Rebuild bool

	rebuild backoff // Blocklisted: when the next rebuild is due

	// The preferred gateway's announcements: none before announce.due,
	// which a takeover that could not make the group ready (ErrNotReady)
	// moves out by a back-off from the failback delay up to
	// maxAnnounceBackoff, so that a failing preferred gateway is not given
	// the group, fenced and rebuilt round after round.
	announce backoff

	readyCookie string        // Owner: the preferred's run standing by, "" none
	readySince  time.Duration // seen standing by since then
	failingBack bool          // the release asked is a failback
	deferSince  time.Duration // Standby: first saw a handover to another, at this time
	deferring   bool          // the last acquire left the lease to a handover

	state     State
	deadline  time.Duration // Owner: step down at this time
	wallLimit time.Time     // and at this wall time (zero: Wall unset)
	lastTry   time.Duration // start of the last op
	tried     bool
	holdUntil time.Duration // no acquire before this, after a release
	busy      Op            // the op running, or OpNone
	releasing bool          // a release was asked and has not run yet
	releaseBy time.Duration // the deadline the owner had when it released

	Takeovers uint64 // times this daemon became the owner
	Fencings  uint64 // previous owners this daemon fenced
	Failbacks uint64 // times this daemon handed the group back to its preferred gateway
	Rebuilds  uint64 // times the group's client was rebuilt after a blocklist
	// RebuildFailures counts rebuilds that failed (tried again after a
	// back-off).
	RebuildFailures uint64
	LastErr         error // the last op's error, nil after a success
}

// State is the lease's state.
func (l *Lease) State() State { return l.state }

// Busy is the op in flight, OpNone if none.
func (l *Lease) Busy() Op { return l.busy }

// Wake advances the machine to now: an owner past its deadline steps down,
// and the op to start now is returned (OpNone if nothing is due or one is
// in flight). next is when to wake again at the latest (0 if only a result
// or a request can change anything).
func (l *Lease) Wake(now time.Duration) (op Op, next time.Duration) {
	l.checkDeadline(now)
	if l.state == Blocklisted {
		return l.wakeBlocklisted(now)
	}
	if at, ok := l.failbackAt(); ok && now >= at && l.Moves.take(now) {
		l.Release(now)
		l.failingBack = true
	}
	if l.busy == OpNone {
		switch due := !l.tried || now >= l.lastTry+l.Timing.Renew; {
		case l.releasing && l.failingBack:
			op = OpFailback
		case l.releasing:
			op = OpRelease
		case l.state == Owner && due:
			op = OpRenew
		case l.state == Standby && due && now >= l.holdUntil:
			op = OpAcquire
		}
		if op != OpNone {
			l.busy, l.lastTry, l.tried = op, now, true
		}
	}
	if l.busy == OpNone {
		next = max(l.lastTry+l.Timing.Renew, l.holdUntil)
	}
	if l.state == Owner && (next == 0 || l.deadline < next) {
		next = l.deadline
	}
	if at, ok := l.failbackAt(); ok && at < next {
		next = at
	}
	return op, next
}

// maxAnnounceBackoff bounds how long a preferred gateway whose takeovers
// could not make the group ready waits before it announces itself again.
const maxAnnounceBackoff = 10 * time.Minute

// Announces reports whether an acquire at now that finds the lease held
// announces this gateway as the preferred one standing by: it is the
// group's preferred gateway, and no failed takeover's back-off runs.
func (l *Lease) Announces(now time.Duration) bool {
	return l.Preferred != "" && l.Name == l.Preferred && now >= l.announce.due
}

// maxRebuildBackoff bounds the wait between failed rebuilds: a cluster
// that refuses the new client for a while gets a try every minute.
const maxRebuildBackoff = time.Minute

// wakeBlocklisted asks for a rebuild once no op is in flight (the old
// client's last call returned) and the back-off has passed.
func (l *Lease) wakeBlocklisted(now time.Duration) (op Op, next time.Duration) {
	if !l.Rebuild || l.busy != OpNone {
		return OpNone, 0
	}
	if now < l.rebuild.due {
		return OpNone, l.rebuild.due
	}
	l.busy = OpRebuild
	return OpRebuild, 0
}

// blocklisted enters the Blocklisted state; the first rebuild is due at
// once.
func (l *Lease) blocklisted() {
	if l.state == Blocklisted {
		return
	}
	l.state = Blocklisted
	l.rebuild.reset()
	l.releasing, l.failingBack, l.readyCookie, l.deferring = false, false, "", false
}

// rebuilt takes a rebuild's result: the new client stands by, leaving
// the lease to a peer for a while; or, failed, the next is due after the back-off, which doubles.
func (l *Lease) rebuilt(now time.Duration, err error) {
	if err != nil {
		l.RebuildFailures++
		l.rebuild.failed(now, l.Timing.Renew, maxRebuildBackoff)
		return
	}
	l.Rebuilds++
	l.state = Standby
	// A peer is taking the group over: it tries once the old client's
	// lock expires, within a lease, and at its interval after that. The
	// rebuilt gateway leaves it that long, as after a release, so that it
	// does not win the group straight back.
	l.holdUntil = now + l.Timing.Holdoff + l.Timing.Renew
}

// RebuildBackoff is how long after now the next rebuild is due; 0 if
// none is pending.
func (l *Lease) RebuildBackoff(now time.Duration) time.Duration {
	if l.state != Blocklisted || l.rebuild.due <= now {
		return 0
	}
	return l.rebuild.due - now
}

// failbackAt is when the owner hands the group back to its preferred
// gateway, seen standing by; ok false if it does not.
func (l *Lease) failbackAt() (at time.Duration, ok bool) {
	if l.state != Owner || l.releasing || l.Failback <= 0 || l.readyCookie == "" {
		return 0, false
	}
	return max(l.readySince+l.Failback, l.Moves.due()), true
}

// SetPreferred makes name the group's preferred gateway (balancing
// reassigns it as gateways come and go): an owner counts the new one's
// standing by afresh.
func (l *Lease) SetPreferred(name string) {
	if name != l.Preferred {
		l.Preferred = name
		l.readyCookie = ""
	}
}

// seeStandby takes what an owner's renewal saw of the preferred gateway:
// the count starts at the first sight of a run standing by and starts
// again whenever none is seen or another run (a restart) is.
func (l *Lease) seeStandby(r Result) {
	switch {
	case !r.Looked || r.Err != nil || l.state != Owner:
	case r.Ready == "":
		l.readyCookie = ""
	case r.Ready != l.readyCookie:
		l.readyCookie, l.readySince = r.Ready, r.Started
	}
}

// checkDeadline steps an owner down once its deadline has passed on
// either clock.
func (l *Lease) checkDeadline(now time.Duration) {
	if l.state != Owner {
		return
	}
	// Round(0): compared as wall times, not by Go's monotonic reading.
	if now >= l.deadline || !l.wallLimit.IsZero() && !l.Wall().Round(0).Before(l.wallLimit) {
		l.state = Standby
	}
}

// setDeadline makes the owner's deadline the Timing's from r's start.
func (l *Lease) setDeadline(r Result) {
	l.deadline = r.Started + l.Timing.Deadline
	l.wallLimit = time.Time{}
	if l.Wall != nil && !r.StartedWall.IsZero() {
		l.wallLimit = r.StartedWall.Round(0).Add(l.Timing.Deadline)
	}
}

// Done takes the result of the op in flight.
func (l *Lease) Done(now time.Duration, r Result) {
	l.busy = OpNone
	l.lastTry = r.Started
	l.LastErr = r.Err
	if errors.Is(r.Err, ErrBusy) || errors.Is(r.Err, ErrHandover) {
		l.LastErr = nil // a standby's normal answer, not a problem
	}
	l.checkDeadline(now)
	if r.Op == OpRebuild {
		l.rebuilt(now, r.Err)
		return
	}
	if errors.Is(r.Err, ErrBlocklisted) {
		l.blocklisted()
		return
	}
	switch r.Op {
	case OpRenew:
		switch {
		case r.Err == nil:
			// Still owner (the deadline did not pass meanwhile): the lock
			// runs for a whole lease from when the call started, at the
			// earliest.
			if l.state == Owner {
				l.setDeadline(r)
				l.seeStandby(r)
			}
		case errors.Is(r.Err, ErrLost), errors.Is(r.Err, ErrBusy):
			l.state = Standby
		}
		// Other errors: the cluster did not answer; the owner keeps
		// serving until its deadline and tries again.
	case OpAcquire:
		l.seeHandover(r)
		if r.Fenced != "" {
			l.Fencings++
		}
		if errors.Is(r.Err, ErrNotReady) {
			l.announce.failed(now, max(l.Failback, l.Timing.Renew), maxAnnounceBackoff)
		}
		if errors.Is(r.Err, ErrFenceFailed) || errors.Is(r.Err, ErrNotReady) {
			// The lock went back: another gateway may fence, or make the
			// namespaces ready, where this one could not. Try again after
			// a hold-off.
			l.holdUntil = now + l.Timing.Holdoff
		}
		// Taken late (the calls took longer than the deadline allows):
		// stay inaccessible; the next acquire renews our lock. Fenced
		// meanwhile (an I/O found the client blocklisted): stay
		// blocklisted, for the client to be rebuilt; the lock lapses.
		if r.Err == nil && !l.releasing && l.state != Blocklisted && now < r.Started+l.Timing.Deadline {
			l.state = Owner
			l.setDeadline(r)
			l.Takeovers++
			l.readyCookie = "" // count afresh for this ownership
			l.announce.reset()
		}
	case OpRelease, OpFailback:
		l.releasing = false
		l.holdUntil = now + l.Timing.Holdoff
		if l.failingBack && r.Err == nil {
			// The preferred gateway, notified, takes the group at once;
			// should it not (it died since its last announcement), this
			// daemon, like the others, takes it again once the handover's
			// bound has passed (HonourHandover), not after a lease.
			l.holdUntil = now + l.Timing.Renew
			l.Failbacks++
		}
		l.failingBack = false
		if r.Err != nil {
			// Stopped short (a command of the group still in flight, or
			// one whose fate is unknown): our lock stays until it
			// expires, and our own next acquire would take it straight
			// back, fencing nobody. Leave it to a peer, which fences us.
			l.holdUntil = now + l.Timing.Holdoff + l.Timing.Renew
		}
	}
}

// handoverWait bounds how long a gateway leaves the lease to a failback
// handed to another: the preferred gateway, notified, takes it within
// milliseconds; one that died since it announced itself must not keep
// the group unowned for longer than two tries.
func (l *Lease) handoverWait() time.Duration { return 2 * l.Timing.Renew }

// seeHandover counts from the first acquire that left the lease to a
// handover; any other outcome ends the count.
func (l *Lease) seeHandover(r Result) {
	switch {
	case !errors.Is(r.Err, ErrHandover):
		l.deferring = false
	case !l.deferring:
		l.deferring, l.deferSince = true, r.Started
	}
}

// HonourHandover reports whether an acquire at now leaves the lease to a
// failback handed to another gateway: until handoverWait has passed
// since this gateway first found the handover.
func (l *Lease) HonourHandover(now time.Duration) bool {
	return !l.deferring || now < l.deferSince+l.handoverWait()
}

// Fenced takes the word of the I/O path that the cluster refuses this
// daemon's client (a namespace's write failed with ESHUTDOWN): an owner
// steps down at once, without waiting for its next lock call to say so.
func (l *Lease) Fenced() { l.blocklisted() }

// Poke makes a try due now: a peer released the lease (it notified the
// lease object), so a standby need not wait for its next interval. In a
// group with a preferred gateway only that one hurries: a release may be
// a failback to it, which the others must not win to; they try at their
// interval, as they would without a watch.
func (l *Lease) Poke() {
	if l.Preferred != "" && l.Name != l.Preferred {
		return
	}
	l.tried = false
}

// Release gives the group up: an owner steps down at once (the caller
// makes the group inaccessible before the lock goes), and the lock is
// released by the next op. It reports whether this daemon was the owner.
func (l *Lease) Release(now time.Duration) bool {
	l.checkDeadline(now)
	if l.state != Owner {
		return false
	}
	l.state = Standby
	l.releasing = true
	l.releaseBy = l.deadline
	l.readyCookie = ""
	return true
}

// ReleaseBy is the deadline the owner had when it released: its lock may
// expire soon after, so a release op that has not drained the group's
// commands by then leaves the lock to expire and its record for the next
// owner to fence this daemon by.
func (l *Lease) ReleaseBy() time.Duration { return l.releaseBy }

// Run carries out op against s for the holder me (whose Addr Run fills
// in). It returns the address it fenced, if any. An acquire that finds a
// failback handed to another gateway gives the lock back (ErrHandover)
// while honourHandover (Lease.HonourHandover); a failback release
// records the handover to preferred.
func Run(op Op, s Store, me Holder, preferred string, honourHandover bool) (fenced string, err error) {
	switch op {
	case OpRenew:
		return "", s.Lock(true)
	case OpRelease, OpFailback:
		var rec Holder
		if op == OpFailback {
			rec.Handover = preferred
		}
		if err := s.Record(rec); err != nil {
			return "", err
		}
		if err := s.Unlock(); err != nil {
			return "", err
		}
		if n, ok := s.(Notifier); ok {
			n.Notify() // best effort: peers also try at their interval
		}
		return "", nil
	case OpAcquire:
		if err := s.Lock(false); err != nil {
			return "", err
		}
		prev, err := s.Recorded()
		if err != nil {
			return "", err
		}
		if prev.Handover != "" && prev.Handover != me.Name && honourHandover {
			s.Unlock()
			return "", fmt.Errorf("%w (%s)", ErrHandover, prev.Handover)
		}
		if prev.Cookie != "" && prev.Cookie != me.Cookie {
			// The previous owner did not release the lease: it died, or
			// lost the cluster, or stopped. Its writes in flight must not
			// land after ours.
			if err := fence(s, prev); err != nil {
				// Holding the lock without serving would keep every
				// other gateway out: give it back for one that can fence.
				s.Unlock()
				return "", err
			}
			fenced = prev.Addr
		}
		if me.Addr, err = s.Self(); err != nil {
			return fenced, err
		}
		return fenced, s.Record(me)
	}
	return "", nil
}

// LookForStandby runs failback's calls after op on s, for the holder me
// and the group's preferred gateway: a preferred standby that found the
// lease held announces itself for ttl if announce (Lease.Announces, and
// its namespaces ready to serve); an owner that renewed looks for the
// preferred's announcement, and takes it as ready only if it serves the
// same namespaces in the group (differs is the preferred's digest where it
// does not: an edit made through one gateway alone would vanish, its I/O
// stalled, once the group moved). Announcing is best effort: one missed
// only delays a failback.
func LookForStandby(op Op, opErr error, s Store, me Holder, preferred string, ttl time.Duration, announce bool) (looked bool, ready, differs string) {
	sb, ok := s.(Standbys)
	if !ok || preferred == "" {
		return false, "", ""
	}
	switch {
	case op == OpAcquire && errors.Is(opErr, ErrBusy) && me.Name == preferred && announce:
		sb.Announce(me, ttl)
	case op == OpRenew && opErr == nil && me.Name != preferred:
		// A look that fails has not seen it standing by: the count
		// starts again, rather than hand over on an unknown.
		a, err := sb.Announced(preferred)
		if err != nil {
			return true, "", ""
		}
		// An announcement without a digest comes from a gateway of an
		// earlier release, during a rolling upgrade: not compared.
		if _, theirs, ok := strings.Cut(a, " "); ok && me.Namespaces != "" && theirs != me.Namespaces {
			return true, "", theirs
		}
		return true, a, ""
	}
	return false, "", ""
}

// fence blocklists the previous owner prev; an error wraps ErrFenceFailed.
func fence(s Store, prev Holder) error {
	if prev.Addr == "" {
		return fmt.Errorf("%w: the previous owner %s recorded no client address", ErrFenceFailed, prev.Name)
	}
	if err := s.Fence(prev.Addr); err != nil {
		return fmt.Errorf("%w: %s (%s): %w", ErrFenceFailed, prev.Name, prev.Addr, err)
	}
	return nil
}
