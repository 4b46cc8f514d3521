package fabrics

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Pinned ANA groups. A gateway that holds a lease on an ANA group decides
// the group's state on every port of the daemon, whatever the ports'
// configured states say: optimized while it owns the group, inaccessible
// otherwise. The pin is kept by every later change of a port's states and
// given to every port added, all under t.mu, so a reload that applies the
// configured states can never undo a step down.

// PinANAGroup sets group g to state s on every port, now and for ports
// added later, until UnpinANAGroup. Each port whose state changes logs it
// and raises the ANA change event, as SetANAStates does.
func (t *Target) PinANAGroup(g uint32, s nvme.ANAState) error {
	if g < 1 || g > nvme.MaxANAGroups {
		return fmt.Errorf("ANA group %d is out of range 1..%d", g, nvme.MaxANAGroups)
	}
	if !s.Valid() {
		return fmt.Errorf("ANA group %d: invalid state %v", g, s)
	}
	t.mu.Lock()
	if t.anaPinned == nil {
		t.anaPinned = map[uint32]nvme.ANAState{}
	}
	t.anaPinned[g] = s
	t.storePinnedSetLocked()
	ids := slices.Sorted(maps.Keys(t.ports))
	t.mu.Unlock()
	for _, id := range ids {
		// A port removed meanwhile is not an error: nothing to change.
		_, _ = t.updateANA(id, cloneANA) // QuiesceANAGroup waits for the writes
	}
	return nil
}

// UnpinANAGroup hands group g back to the ports' configured states; the
// ports keep its pinned state until their states are next set.
func (t *Target) UnpinANAGroup(g uint32) {
	t.mu.Lock()
	delete(t.anaPinned, g)
	t.storePinnedSetLocked()
	t.mu.Unlock()
}

// PinnedANAGroups is the pinned groups and their states.
func (t *Target) PinnedANAGroups() map[uint32]nvme.ANAState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.anaPinned)
}

// pinLocked puts the pinned states into tab; called with t.mu held.
func (t *Target) pinLocked(tab *anaTable) {
	for g, s := range t.anaPinned {
		tab[g] = s
	}
}

// pinPortLocked gives a port being added the pinned states; called with
// t.mu held, before any host can reach the port.
func (t *Target) pinPortLocked(p *Port) {
	if len(t.anaPinned) == 0 {
		return
	}
	tab := cloneANA(p.ana.Load())
	t.pinLocked(tab)
	p.ana.Store(tab)
}

// cloneANA copies a port's table; nil is every group optimized.
func cloneANA(cur *anaTable) *anaTable {
	tab := new(anaTable)
	if cur != nil {
		*tab = *cur
		return tab
	}
	for g := range tab {
		tab[g] = nvme.ANAOptimized
	}
	return tab
}

// ErrUnsettledWrites: a write of the group timed out in the cluster
// (librados' rados_osd_op_timeout), which cancels it only here: it may
// still land, after the next owner's writes, unless that owner fences this
// client. It counts as in flight until then.
var ErrUnsettledWrites = errors.New("writes timed out in the cluster and may still land: the next owner must fence this client")

// claimedHook, if set (tests only), runs once an I/O command is counted
// in flight on its namespace, before its ANA check.
var claimedHook func(*Request)

// QuiesceANAGroup waits until no command on a namespace of group g is in
// flight, then flushes those namespaces: every write this daemon accepted
// for the group is then on its backend, so that a gateway taking the group
// over cannot have a write of its own overtaken by one of ours. The caller
// made the group inaccessible first (PinANAGroup), so no command starts
// on it meanwhile. An error names the namespace whose commands did not
// finish within timeout or whose flush failed, or one with a write that
// timed out in the cluster (ErrUnsettledWrites): every such error leaves
// the lease to expire, and the next owner fences this client.
func (t *Target) QuiesceANAGroup(g uint32, timeout time.Duration) error {
	members, err := t.drainANAGroup(g, timeout)
	if err != nil {
		return err
	}
	for _, m := range members {
		if n := m.ns.unsettled.Load(); n != 0 {
			return fmt.Errorf("subsystem %s namespace %d: %w (%d since this client opened it)", m.nqn, m.ns.ID, ErrUnsettledWrites, n)
		}
	}
	for _, m := range members {
		if m.ns.ReadOnly || !m.ns.hold() {
			continue // removed meanwhile: its removal drains and flushes it
		}
		err := m.ns.Backend.Flush()
		m.ns.unhold()
		if err != nil {
			return fmt.Errorf("subsystem %s namespace %d: flush: %w", m.nqn, m.ns.ID, err)
		}
	}
	return nil
}

// groupMember is a namespace of an ANA group, with its subsystem's NQN
// for errors.
type groupMember struct {
	nqn string
	ns  *Namespace
}

// anaGroupMembers is every namespace of group g, over all subsystems.
func (t *Target) anaGroupMembers(g uint32) []groupMember {
	var members []groupMember
	t.mu.Lock()
	subs := t.subsystemsLocked()
	t.mu.Unlock()
	for _, s := range subs {
		for _, id := range s.NamespaceIDs() {
			if ns := s.Namespace(id); ns != nil && ns.ANAGroup() == g {
				members = append(members, groupMember{s.NQN, ns})
			}
		}
	}
	return members
}

// ANAGroupNamespaces names every namespace of group g, sorted, each as
// its subsystem's NQN, its NSID and its UUID: what two gateways must
// agree on before one hands the group to the other.
func (t *Target) ANAGroupNamespaces(g uint32) []string {
	var names []string
	for _, m := range t.anaGroupMembers(g) {
		names = append(names, fmt.Sprintf("%s %d %x", m.nqn, m.ns.ID, m.ns.UUID))
	}
	slices.Sort(names)
	return names
}

// drainANAGroup waits until no command on a namespace of group g is in
// flight, and returns those namespaces. An error names the namespace whose
// commands did not finish within timeout.
func (t *Target) drainANAGroup(g uint32, timeout time.Duration) ([]groupMember, error) {
	deadline := time.Now().Add(timeout)
	members := t.anaGroupMembers(g)
	for _, m := range members {
		if !m.ns.drain(time.Until(deadline)) {
			return nil, fmt.Errorf("subsystem %s namespace %d: commands still in flight after %v", m.nqn, m.ns.ID, timeout)
		}
	}
	return members, nil
}

// storePinnedSetLocked publishes which groups are pinned, for the I/O
// path; called with t.mu held.
func (t *Target) storePinnedSetLocked() {
	set := new([nvme.MaxANAGroups + 1]bool)
	for g := range t.anaPinned {
		set[g] = true
	}
	t.pinnedSet.Store(set)
}

// pinned reports whether group g is pinned (a gateway group). Lock-free.
func (t *Target) pinned(g uint32) bool {
	set := t.pinnedSet.Load()
	return set != nil && g <= nvme.MaxANAGroups && set[g]
}

// SetFencedHook sets what a backend's ESHUTDOWN (its cluster client
// blocklisted: fenced by a peer gateway) on a namespace of a pinned group
// calls, with the group: the gateway steps down at once. It must not
// block; it runs on the thread that completes the I/O.
func (t *Target) SetFencedHook(f func(group uint32)) { t.onFenced.Store(&f) }

// backendStatus is the status for r's backend error. In a pinned (gateway)
// group, a cluster out of reach or a fenced client is not the namespace's
// fault but this path's: the host gets the group's ANA path status, ANA
// Transition while the group is still optimized here (the step down is
// under way), so that its multipath sends the command to the gateway that
// owns the group, rather than Namespace Not Ready, which the Linux host
// retries on this same path and then fails. A fenced client also steps
// the gateway down (SetFencedHook).
func (r *Request) backendStatus(err error, write bool) nvme.Status {
	st := ioStatus(err, write)
	if st != nvme.StatusNamespaceNotReady {
		return st
	}
	if path, ok := r.pathStatus(err, write); ok {
		return path
	}
	return st
}

// pathStatus is, in a gateway group, the path status for err, a cluster
// error that ioStatus makes Namespace Not Ready; ok is false outside one.
// A fenced client (ESHUTDOWN) steps the gateway down, and a write that
// timed out stays in flight (ErrUnsettledWrites).
func (r *Request) pathStatus(err error, write bool) (st nvme.Status, ok bool) {
	if r.q.target == nil {
		return 0, false
	}
	g := r.ns.ANAGroup()
	if !r.q.target.pinned(g) {
		return 0, false
	}
	if errors.Is(err, syscall.ESHUTDOWN) {
		if f := r.q.target.onFenced.Load(); f != nil {
			(*f)(g)
		}
	}
	if write && errors.Is(err, syscall.ETIMEDOUT) {
		// The client gave up waiting; the write may still sit in a
		// socket or an OSD's queue and land later.
		r.ns.unsettled.Add(1)
	}
	if path := r.q.port.ANAState(g).IOStatus(); path != 0 {
		return path, true
	}
	return nvme.StatusANATransition, true
}
