package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// Runner drives one group's Lease: it wakes the machine on time, runs its
// ops against the Store on a goroutine of their own (a call may block for
// the client's timeouts) and publishes every change of state through
// Publish. A step down at the deadline never waits for a call in flight.
type Runner struct {
	Lease *Lease
	Store Store
	Me    Holder // Addr is filled in by each acquire
	// Publish sets the group's ANA state for st; called from one
	// goroutine at a time, in order, with the latest state.
	Publish func(group uint32, st State)
	Log     *logrus.Entry
	Now     func() time.Duration // CLOCK_BOOTTIME; the wall clock is Lease.Wall
	// Quiesce, before a release unlocks, waits up to timeout for the
	// commands in flight on the group's namespaces (inaccessible by then)
	// to complete and flushes them. On an error the release stops short:
	// the lock expires and the next owner fences this daemon.
	Quiesce func(group uint32, timeout time.Duration) error
	// Rebuild, if set, replaces the group's blocklisted RADOS client by
	// a new instance (the Store's and the group's images'), once the
	// group is inaccessible and no op is in flight; the group then stands
	// by again. A failed one is tried again after a back-off. Nil: the
	// group stays blocklisted.
	Rebuild func(group uint32) error
	// Ready, if set, runs after an acquire took the lease and fenced the
	// previous owner, before the group turns optimized here: it reads
	// what the group's namespaces share through the cluster (their
	// reservation state). On an error the lease is given back (ErrNotReady)
	// and the group stays inaccessible here; the next try runs it again.
	Ready func(group uint32) error
	// Namespaces, if set, is a digest of the namespaces this daemon
	// serves in group (Holder.Namespaces): failback goes only to a
	// preferred gateway that serves the same.
	Namespaces func(group uint32) string
	// PreferredOf, if set, names the group's preferred gateway at each
	// wake (Members.Preferred, with balancing), overriding
	// Lease.Preferred.
	PreferredOf func(group uint32) string

	mu        sync.Mutex // guards Lease
	pubMu     sync.Mutex // orders Publish calls
	published State
	since     time.Time // when published last changed, on the wall clock; under mu
	wake      chan struct{}
	results   chan Result
	released  chan struct{} // a release op finished
	done      chan struct{}
	ops       sync.WaitGroup // the op in flight, if any
	opsDone   uint64         // lease operations finished, under mu
	notReady  bool           // readyToAnnounce's last outcome; the op in flight's
	differs   string         // the preferred's digest where it differed at the last look; the op in flight's
}

// Status is a snapshot of a lease for the API and metrics.
type Status struct {
	Group     uint32
	State     State
	Preferred string // the gateway the group fails back to, "" none
	Takeovers uint64
	Fencings  uint64
	Failbacks uint64
	// Ops counts the lease operations finished (tries to acquire,
	// renewals, releases, rebuilds), whatever their result.
	Ops uint64
	// Rebuilds and RebuildFailures count the client's rebuilds after a
	// blocklist; RebuildIn is the wait before the next, if one failed.
	Rebuilds        uint64
	RebuildFailures uint64
	RebuildIn       time.Duration
	LastError       string
	// Since is when the group last took its state here (its ANA state
	// set), on the wall clock: an operator reads how long a gateway has
	// owned or stood by, and a failback's delay shows from the daemons.
	Since time.Time
}

// Status is the lease's state now.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Status{Group: r.Lease.Group, State: r.Lease.State(), Preferred: r.Lease.Preferred, Takeovers: r.Lease.Takeovers, Fencings: r.Lease.Fencings, Failbacks: r.Lease.Failbacks,
		Rebuilds: r.Lease.Rebuilds, RebuildFailures: r.Lease.RebuildFailures, Ops: r.opsDone, Since: r.since}
	if r.Now != nil {
		s.RebuildIn = r.Lease.RebuildBackoff(r.Now())
	}
	if r.Lease.LastErr != nil {
		s.LastError = r.Lease.LastErr.Error()
	}
	return s
}

// Start publishes the initial state (standby: inaccessible) and runs the
// lease until ctx ends.
func (r *Runner) Start(ctx context.Context) {
	r.wake = make(chan struct{}, 1)
	r.results = make(chan Result, 1)
	r.released = make(chan struct{}, 1)
	r.done = make(chan struct{})
	r.published = -1
	r.Lease.Rebuild = r.Rebuild != nil
	r.publish()
	go r.loop(ctx)
}

// Done is closed when the loop has ended.
func (r *Runner) Done() <-chan struct{} { return r.done }

// Wait waits for the loop to end (its context cancelled) and for the op
// in flight to return, after which the Store is no longer used.
func (r *Runner) Wait() {
	<-r.done
	r.ops.Wait()
}

func (r *Runner) loop(ctx context.Context) {
	defer close(r.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.mu.Lock()
		now := r.Now()
		if r.PreferredOf != nil {
			r.Lease.SetPreferred(r.PreferredOf(r.Lease.Group))
		}
		op, next := r.Lease.Wake(now)
		by, owner, honour, announce := r.Lease.ReleaseBy(), r.Lease.State() == Owner, r.Lease.HonourHandover(now), r.Lease.Announces(now)
		preferred := r.Lease.Preferred
		r.mu.Unlock()
		r.publish()
		if op != OpNone {
			r.ops.Add(1)
			go r.run(op, by, preferred, honour, announce)
		}
		timer.Stop()
		if next != 0 {
			wait := max(next-r.Now(), time.Millisecond)
			if owner {
				// Go's timers run on CLOCK_MONOTONIC, which stands
				// still while the machine is suspended: an owner looks
				// at its clocks often, to step down soon after a resume.
				wait = min(wait, r.Lease.Timing.Renew/10)
			}
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return
		case res := <-r.results:
			r.mu.Lock()
			prev, failbacks := r.Lease.State(), r.Lease.Failbacks
			now := r.Now()
			r.Lease.Done(now, res)
			r.opsDone++
			st, failedBack, retryIn, preferred := r.Lease.State(), r.Lease.Failbacks != failbacks, r.Lease.RebuildBackoff(now), r.Lease.Preferred
			r.mu.Unlock()
			r.logResult(res, prev, st, retryIn)
			if took := now - res.Started; took > r.Lease.Timing.Renew/2 && res.Op != OpRebuild {
				// The cluster answers slowly: a renewal this slow eats
				// into the deadline, an acquire this slow keeps the group
				// unserved. (A rebuild connects a new client: slower.)
				r.Log.WithFields(logrus.Fields{"ana_group": r.Lease.Group, "gateway": r.Me.Name, "op": res.Op.String(), "took": took.Round(time.Millisecond).String()}).Warn("gateway lease operation slow")
			}
			if failedBack {
				r.Log.WithFields(logrus.Fields{"ana_group": r.Lease.Group, "gateway": r.Me.Name, "preferred": preferred}).Info("gateway handed the ANA group back to its preferred gateway, standing by for the failback delay")
			}
			if res.Op.Releases() {
				select {
				case r.released <- struct{}{}:
				default:
				}
			}
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// run carries out op; a release first quiesces the group, by the owner's
// deadline releaseBy. preferred is the group's preferred gateway when the
// op started.
func (r *Runner) run(op Op, releaseBy time.Duration, preferred string, honourHandover, announce bool) {
	defer r.ops.Done()
	started := r.Now()
	var startedWall time.Time
	if r.Lease.Wall != nil {
		startedWall = r.Lease.Wall()
	}
	var fenced string
	var err error
	me := r.Me
	if r.Namespaces != nil {
		me.Namespaces = r.Namespaces(r.Lease.Group)
	}
	if op.Releases() && r.Quiesce != nil {
		err = r.Quiesce(r.Lease.Group, releaseBy-started)
	}
	if op == OpRebuild {
		r.results <- Result{Op: op, Started: started, StartedWall: startedWall, Err: r.Rebuild(r.Lease.Group)}
		return
	}
	if err == nil {
		fenced, err = Run(op, r.Store, me, preferred, honourHandover)
	}
	if op == OpAcquire && err == nil && r.Ready != nil {
		err = r.ready()
	}
	if announce && op == OpAcquire && errors.Is(err, ErrBusy) {
		announce = r.readyToAnnounce()
	}
	looked, ready, differs := LookForStandby(op, err, r.Store, me, preferred, 2*r.Lease.Timing.Renew, announce)
	if looked {
		r.seeNamespaces(me, preferred, differs)
	}
	r.results <- Result{Op: op, Started: started, StartedWall: startedWall, Fenced: fenced, Err: err, Looked: looked, Ready: ready}
}

// readyToAnnounce runs Ready on the preferred gateway standing by, before
// it announces itself for a failback: a gateway that could not serve the
// group is not given it. A change of the outcome is logged. Called from
// the op in flight, one at a time.
func (r *Runner) readyToAnnounce() bool {
	if r.Ready == nil {
		return true
	}
	err := r.Ready(r.Lease.Group)
	if (err != nil) != r.notReady {
		log := r.Log.WithFields(logrus.Fields{"ana_group": r.Lease.Group, "gateway": r.Me.Name})
		if err != nil {
			log.WithError(err).Warn("preferred gateway cannot make the ANA group's namespaces ready: not announcing itself for a failback")
		} else {
			log.Info("preferred gateway ready again: announcing itself for a failback")
		}
	}
	r.notReady = err != nil
	return err == nil
}

// seeNamespaces logs when the preferred gateway's namespaces in the group
// start or stop differing from this owner's. Called from the op in
// flight, one at a time.
func (r *Runner) seeNamespaces(me Holder, preferred, differs string) {
	if differs == r.differs {
		return
	}
	log := r.Log.WithFields(logrus.Fields{"ana_group": r.Lease.Group, "gateway": me.Name, "preferred": preferred})
	if differs != "" {
		log.WithFields(logrus.Fields{"namespaces": me.Namespaces, "preferred_namespaces": differs}).Warn("the preferred gateway serves other namespaces in the ANA group than this owner (a change made through one gateway only?): no failback to it until they match")
	} else if r.differs != "" {
		log.Info("the preferred gateway serves the ANA group's namespaces again: failback may proceed")
	}
	r.differs = differs
}

// ready runs Ready for the lease just taken; on an error it gives the
// lease back for a gateway that can serve the group, its record still
// naming this daemon, so that the next owner fences it: this daemon may
// have stepped down at its deadline with commands in flight and taken
// its own lock back, which fences nobody.
func (r *Runner) ready() error {
	err := r.Ready(r.Lease.Group)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("%w: %v", ErrNotReady, err)
	if uerr := r.Store.Unlock(); uerr != nil {
		return fmt.Errorf("%w; giving the lease back: %w", err, uerr) // ErrBlocklisted stays visible
	}
	return err
}

func (r *Runner) logResult(res Result, prev, st State, retryIn time.Duration) {
	log := r.Log.WithFields(logrus.Fields{"ana_group": r.Lease.Group, "op": res.Op.String(), "gateway": r.Me.Name})
	if res.Fenced != "" {
		log.WithField("client", res.Fenced).Warn("gateway fenced the previous owner of the ANA group: its RADOS client is blocklisted")
	}
	switch {
	case res.Op == OpRebuild && res.Err != nil:
		log.WithError(res.Err).WithField("retry_in", retryIn.String()).Error("gateway could not rebuild the ANA group's RADOS client; trying again after the back-off")
	case res.Op == OpRebuild:
		log.Info("gateway rebuilt the ANA group's RADOS client (a new client instance, images reopened): standing by again")
	case st == Blocklisted && prev != Blocklisted && r.Rebuild == nil:
		log.WithError(res.Err).Error("gateway's RADOS client is blocklisted: the ANA group stays inaccessible here until the daemon restarts")
	case st == Blocklisted && prev != Blocklisted:
		log.WithError(res.Err).Error("gateway's RADOS client is blocklisted: the ANA group is inaccessible here while its client is rebuilt")
	case errors.Is(res.Err, ErrNotReady):
		log.WithError(res.Err).Error("gateway took the ANA group's lease but could not make its namespaces ready to serve: lease given back, the group stays inaccessible here")
	case res.Err != nil && res.Op == OpRenew:
		log.WithError(res.Err).Warn("gateway lease renewal failed")
	case res.Err != nil && res.Op.Releases():
		log.WithError(res.Err).Warn("gateway lease release failed; the lease expires on its own")
	case res.Err != nil && res.Op == OpAcquire && !isBusy(res.Err) && !errors.Is(res.Err, ErrHandover):
		log.WithError(res.Err).Warn("gateway lease acquire failed")
	case res.Op.Releases():
		log.Info("gateway lease released")
	}
}

func isBusy(err error) bool { return errors.Is(err, ErrBusy) }

// publish hands the latest state to Publish if it changed.
func (r *Runner) publish() {
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	r.mu.Lock()
	st := r.Lease.State()
	if st != r.published {
		r.since = time.Now()
		if r.Lease.Wall != nil {
			r.since = r.Lease.Wall()
		}
	}
	r.mu.Unlock()
	if st == r.published {
		return
	}
	if r.published >= 0 {
		r.Log.WithFields(logrus.Fields{"ana_group": r.Lease.Group, "gateway": r.Me.Name, "from": r.published.String(), "to": st.String()}).Info("gateway lease state changed")
	}
	r.published = st
	r.Publish(r.Lease.Group, st)
}

// Poke wakes the lease for a try now: a peer released it. Safe from any
// goroutine; it does not block.
func (r *Runner) Poke() { r.stepAndWake((*Lease).Poke) }

// Fenced steps the group down at once: an I/O on it found this daemon's
// client blocklisted. Safe from any goroutine; it does not block on the
// cluster, and the loop publishes the new state.
func (r *Runner) Fenced() { r.stepAndWake((*Lease).Fenced) }

// stepAndWake steps the lease under r.mu and wakes the loop.
func (r *Runner) stepAndWake(step func(*Lease)) {
	r.mu.Lock()
	step(r.Lease)
	r.mu.Unlock()
	r.wakeLoop()
}

// wakeLoop wakes the loop, without blocking when a wake is already due.
func (r *Runner) wakeLoop() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Release gives the group up if this daemon owns it: the group is
// inaccessible here when Release returns, and the lock is released once
// the group is quiesced (Quiesce), so a peer takes it at its next try. It
// reports whether this daemon was the owner.
func (r *Runner) Release() bool {
	r.mu.Lock()
	was := r.Lease.Release(r.Now())
	r.mu.Unlock()
	if !was {
		return false
	}
	r.publish()
	r.wakeLoop()
	return true
}

// ReleaseAndWait releases the group if owned and waits up to timeout
// for the release to reach the cluster: at a clean shutdown the peer takes
// the group at once instead of after the lease expires.
func (r *Runner) ReleaseAndWait(timeout time.Duration) {
	select {
	case <-r.released: // an earlier release's
	default:
	}
	if r.Release() {
		select {
		case <-r.released:
		case <-time.After(timeout):
		}
	}
}
