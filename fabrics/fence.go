package fabrics

import (
	"slices"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// The fence: one rule for every change of who may write a namespace.
//
// A change that takes write access away from a host (a reservation
// Preempt, with or without Abort, or any change that makes the host's
// writes conflict; hiding the namespace from it; its group turning
// inaccessible on a port; reservations turned back on; another daemon's
// change read from a shared record) completes only once no write-class
// command the host had admitted under the old rule can still reach the
// medium. Every such change keeps it the same way:
//
//  1. Admission. Every I/O command counts itself in flight on its
//     namespace (claim) before it reads the rules (visibility, the ANA
//     state of its port, the reservation), and stays counted until its
//     backend call is over: through a QoS wait, a worker, the ring, an
//     asynchronous backend, and a queue or controller that is closing,
//     whose counters stay on the namespace until Close has waited for
//     its commands.
//  2. The change publishes the narrower rule first, with one atomic
//     store. A command then either reads it or is counted where the
//     fence looks (claim's add and the change's store are both
//     sequentially consistent).
//  3. It ends the commands that have not started: each command waiting on
//     the namespace's QoS limit is checked again against the rules now in
//     force, and those refused complete with the status the rule gives
//     (Reservation Conflict, Invalid Namespace, the ANA status). A
//     command that meets the gate after that is checked again there, and
//     one the gate let go is checked again when its queue resumes it.
//     The transports' own waits before a command executes (for a data
//     buffer of a pool another host may be holding) are checked again the
//     same way: the fence asks each queue in scope with writes in flight
//     to (Rechecker), and the queue fails the waiters Readmit refuses.
//  4. It waits until the write-class commands of the queues that lost
//     access are out of the backend (IOStats.InflightWrites).
//
// Where that wait does not end in time (a hung device, a storage link
// down) the change does not report success: a reservation change goes
// back to the old state and answers Command Interrupted, which the host
// retries; an operator's change answers an error that says the write may
// still land.

// fenceScope picks the controllers whose commands a change waits for.
type fenceScope func(c *Controller) bool

// fence ends the commands waiting on ns's QoS limit that the rules now in
// force refuse, then waits until no write-class command of a controller in
// scope is in flight on ns. It reports false if one still is after
// timeout. The caller published the new rule first.
func (ns *Namespace) fence(scope fenceScope, timeout time.Duration) bool {
	ns.endRefused()
	ns.recheckWaiters(scope)
	return ns.awaitWrites(scope, timeout)
}

// Rechecker is a transport whose commands may wait, admitted, before they
// execute: for a data buffer that a stalled host may never give back.
// Recheck asks it to check each such command again with Queue.Readmit on
// its poller, and to fail those refused; it must not block.
type Rechecker interface{ Recheck() }

// Readmit checks again the rules a command r, admitted and not executed
// yet, was admitted under: 0, or the status to fail it with.
func (q *Queue) Readmit(r *Request) nvme.Status {
	if r.ns == nil {
		return 0
	}
	return q.admission(r)
}

// recheckWaiters asks the transports of the queues in scope that have
// writes in flight on ns to check their waiting commands again.
func (ns *Namespace) recheckWaiters(scope fenceScope) {
	var rs []Rechecker
	ns.statsMu.Lock()
	for _, s := range ns.live {
		if s.ctrl != nil && scope(s.ctrl) && s.InflightWrites.Load() > 0 {
			if rc, ok := s.q.tr.(Rechecker); ok {
				rs = append(rs, rc)
			}
		}
	}
	ns.statsMu.Unlock()
	for _, rc := range rs {
		rc.Recheck()
	}
}

// awaitWrites waits until no write-class command of a controller in scope
// is in flight on ns, reporting false if one still is after timeout.
func (ns *Namespace) awaitWrites(scope fenceScope, timeout time.Duration) bool {
	if fenceHook != nil {
		fenceHook(ns)
	}
	return waitZero(func() int64 { return ns.writesInFlight(scope) }, timeout)
}

// fenceTimeout bounds a fence's wait; tests shorten it.
var fenceTimeout = drainTimeout

// fenceHook, if set (tests only), runs as a fence starts waiting.
var fenceHook func(*Namespace)

// endRefused ends the commands waiting on ns's QoS limit that the rules
// now in force refuse.
func (ns *Namespace) endRefused() {
	if g := ns.qos.gate.Load(); g != nil {
		g.endRefused()
	}
}

// writesInFlight counts the write-class commands in flight on ns from
// controllers in scope, closing queues included.
func (ns *Namespace) writesInFlight(scope fenceScope) int64 {
	ns.statsMu.Lock()
	defer ns.statsMu.Unlock()
	var n int64
	for _, s := range ns.live {
		if s.ctrl != nil && scope(s.ctrl) {
			n += s.InflightWrites.Load()
		}
	}
	return n
}

// admission checks again the rules an I/O command r on its namespace was
// admitted under: the host still sees the namespace, its ANA group is
// accessible through the queue's port and no reservation refuses it. It
// returns the status r must complete with, or 0. It reads only what is
// published atomically, so the fence may call it off the poller for a
// command waiting on the QoS gate.
func (q *Queue) admission(r *Request) nvme.Status {
	ns := r.ns
	// A namespace being removed is not checked: its removal lets the
	// commands it claimed run before its backend closes.
	if !q.ctrl.sees(ns.ID) {
		return nvme.StatusInvalidNamespace | nvme.DNR
	}
	if st := q.anaStatus(ns); st != 0 {
		return st
	}
	if isResvCommand(r.Cmd.Opcode()) {
		if s := ns.resv.snap.Load(); s != nil && s.unavailable {
			return nvme.StatusANAInaccessible
		}
		return 0
	}
	gen, seen := r.resvGen, r.resvSeen
	st := q.resvCheck(r, ns, r.held == &r.nsStats.InflightWrites)
	if st != 0 && seen {
		// Admitted before a Preempt and Abort of its host: it is one of
		// the commands that preempt aborts.
		if s := ns.resv.snap.Load(); s != nil && s.abortGen != gen && slices.Contains(s.aborted, q.ctrl.HostID) {
			st = nvme.StatusPreemptAborted | nvme.DNR
		}
	}
	return st
}

// isResvCommand reports whether an I/O opcode is a reservation command.
func isResvCommand(op uint8) bool {
	switch op {
	case nvme.IOResvRegister, nvme.IOResvReport, nvme.IOResvAcquire, nvme.IOResvRelease:
		return true
	}
	return false
}
