package fabrics

import (
	"fmt"
	"slices"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

// Removal waits this long for commands already dispatched to a namespace
// to finish before its backend is closed.
const drainTimeout = 10 * time.Second

// RemovePort unregisters port id. Controllers that connected through it
// are disconnected; the caller closes the port's listener.
func (t *Target) RemovePort(id uint16) error {
	t.mu.Lock()
	if _, ok := t.ports[id]; !ok {
		t.mu.Unlock()
		return fmt.Errorf("port %d does not exist", id)
	}
	delete(t.ports, id)
	delete(t.referrals, id)
	subs := make([]*Subsystem, 0, len(t.subsystems)+1)
	for _, s := range t.subsystems {
		subs = append(subs, s)
	}
	subs = append(subs, t.discovery)
	t.mu.Unlock()
	t.discoveryChanged()
	for _, s := range subs {
		for _, c := range s.Controllers() {
			if c.Port != nil && c.Port.ID == id {
				c.fatal("port removed")
			}
		}
	}
	return nil
}

// RemoveSubsystem unregisters the subsystem, disconnects its controllers
// and closes its namespaces once their commands have drained.
func (t *Target) RemoveSubsystem(nqn string) error {
	t.mu.Lock()
	s := t.subsystems[nqn]
	if s == nil {
		t.mu.Unlock()
		return fmt.Errorf("subsystem %s does not exist", nqn)
	}
	delete(t.subsystems, nqn)
	t.mu.Unlock()
	t.discoveryChanged()
	s.disconnectAll()
	for _, id := range s.NamespaceIDs() {
		if err := s.RemoveNamespace(id); err != nil {
			return err
		}
	}
	return nil
}

// RemoveNamespace unpublishes namespace nsid: connected hosts get a
// namespace-attribute-changed event and rescan. Commands already
// dispatched to it finish first; then its backend is closed.
func (s *Subsystem) RemoveNamespace(nsid uint32) error {
	s.mu.Lock()
	old := s.namespaces.Load()
	ns := old.byID[nsid]
	if ns == nil {
		s.mu.Unlock()
		return fmt.Errorf("namespace %d does not exist", nsid)
	}
	next := &namespaceSet{byID: make(map[uint32]*Namespace, len(old.byID))}
	for id, n := range old.byID {
		if id != nsid {
			next.byID[id] = n
			next.ids = append(next.ids, id)
		}
	}
	slices.Sort(next.ids)
	// Dekker-style with claim(): a queue either sees removed and backs
	// off, or its in-flight count is visible to drain below.
	ns.removed.Store(true)
	s.namespaces.Store(next)
	s.mu.Unlock()
	ns.openQoS()
	s.namespacesChanged(nsid)
	s.forgetNamespaceHosts(nsid)
	log := s.log().WithFields(logrus.Fields{"subsystem": s.NQN, "nsid": nsid})
	closeBackend := func() {
		s.retireNamespace(ns)
		ns.flushAndClose(log)
	}
	if ns.drain(drainTimeout) {
		closeBackend()
		return nil
	}
	// A backend call is stuck (a hung device). Closing under it could hand
	// its file descriptor to another file, so the close waits for it.
	log.Warn("namespace removed, but a backend call has not returned after 10 s; its backend closes when it does")
	go func() {
		ns.drain(365 * 24 * time.Hour)
		closeBackend()
	}()
	return nil
}

// drain waits until no queue has a command on ns in flight, including
// queues whose controller is already gone.
func (ns *Namespace) drain(timeout time.Duration) bool {
	return waitZero(ns.InFlight, timeout)
}

// waitZero polls count every millisecond until it reads 0, reporting
// false if it still does not after timeout. Commands leave a backend
// without telling anyone, so a count is all there is to wait on.
func waitZero(count func() int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for count() != 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// InFlight is the number of commands on the namespace that have not
// completed: executing, waiting on QoS or on the backend, or held by a
// caller outside any queue. A handover and a removal wait for it to read 0.
func (ns *Namespace) InFlight() int64 {
	return ns.holds.Load() + ns.sumLive(func(s *IOStats) int64 { return s.Inflight.Load() + s.InflightWrites.Load() })
}

// UnsettledWrites is the number of writes of a gateway group's namespace
// that timed out in the cluster since this daemon's client opened it:
// they may still land, so while it is above 0 the group is not released
// cleanly, and its next owner fences this daemon.
func (ns *Namespace) UnsettledWrites() int64 { return ns.unsettled.Load() }

// sumLive adds up one counter of every live queue's IOStats for ns.
func (ns *Namespace) sumLive(counter func(*IOStats) int64) int64 {
	ns.statsMu.Lock()
	defer ns.statsMu.Unlock()
	var n int64
	for _, s := range ns.live {
		n += counter(s)
	}
	return n
}

// ResizeNamespace changes a namespace's capacity in place, as far as its
// backend allows (backend.Resizer; a block device measures itself again).
// Connected hosts get a namespace-attribute-changed event and update the
// size of the block device they already have. Commands beyond a smaller
// end fail with LBA Out of Range from then on.
func (s *Subsystem) ResizeNamespace(nsid uint32, size int64) (changed bool, err error) {
	ns := s.Namespace(nsid)
	if ns == nil {
		return false, fmt.Errorf("namespace %d does not exist", nsid)
	}
	r, ok := ns.Backend.(backend.Resizer)
	if !ok {
		return false, fmt.Errorf("namespace %d: its backend cannot change size", nsid)
	}
	n, err := r.Resize(size)
	if err != nil {
		return false, err
	}
	blocks := uint64(n) >> ns.BlockShift
	if blocks == 0 {
		return false, fmt.Errorf("namespace %d: backend is smaller than one block", nsid)
	}
	if ns.blocks.Swap(blocks) == blocks {
		return false, nil
	}
	s.namespacesChanged(nsid)
	return true, nil
}

// SetHosts replaces the access rules. Controllers of hosts no longer
// allowed are disconnected; the others keep running.
func (s *Subsystem) SetHosts(allowAny bool, hosts []string) {
	s.mu.Lock()
	s.AllowAnyHost = allowAny
	s.hosts = make(map[string]bool, len(hosts))
	for _, h := range hosts {
		s.hosts[h] = true
	}
	s.mu.Unlock()
	for _, c := range s.Controllers() {
		if !s.HostAllowed(c.HostNQN) {
			c.fatal("host no longer allowed")
		}
	}
	s.changedDiscovery()
}

// LinkPorts replaces the ports the subsystem is reachable through (none:
// every port). Controllers on ports no longer linked are disconnected.
func (s *Subsystem) LinkPorts(ids []uint16) {
	s.SetPorts(ids)
	for _, c := range s.Controllers() {
		if c.Port != nil && !s.OnPort(c.Port.ID) {
			c.fatal("port unlinked from subsystem")
		}
	}
	s.changedDiscovery()
}

// changedDiscovery tells discovery controllers that what a host may see
// changed.
func (s *Subsystem) changedDiscovery() {
	if t := s.target; t != nil {
		t.discoveryChanged()
	}
}

func (s *Subsystem) log() *logrus.Entry {
	if s.target != nil {
		return s.target.Log
	}
	return logrus.NewEntry(logrus.StandardLogger())
}

// claim counts r as in flight on ns, unless ns is being removed: write
// is its reservation access class, whose commands a fence waits for.
func (q *Queue) claim(r *Request, ns *Namespace, write bool) nvme.Status {
	st := q.statsFor(ns)
	n := &st.Inflight
	if write {
		n = &st.InflightWrites
	}
	n.Add(1)
	if ns.removed.Load() {
		n.Add(-1)
		return nvme.StatusInvalidNamespace | nvme.DNR
	}
	r.ns, r.nsStats, r.held = ns, st, n
	return 0
}

// release ends r's claim on its namespace once its backend call is over.
func (r *Request) release() {
	if n := r.held; n != nil {
		r.held = nil
		n.Add(-1)
	}
}

// hold keeps ns's backend open for a caller outside any queue (a flush of
// every namespace, a shutdown). It reports false once ns is being removed.
func (ns *Namespace) hold() bool {
	ns.holds.Add(1)
	if ns.removed.Load() {
		ns.holds.Add(-1)
		return false
	}
	return true
}

func (ns *Namespace) unhold() { ns.holds.Add(-1) }

// FlushNamespaces makes every completed write to every namespace durable.
// Each namespace is held while its backend flushes, so a removal running
// at the same time waits instead of closing the descriptor under it. It
// returns the first error; the other namespaces are flushed regardless.
func (s *Subsystem) FlushNamespaces() error {
	return s.flushNamespaceIDs(s.NamespaceIDs())
}

// flushNamespaceIDs flushes the namespaces ids, as FlushNamespaces does.
func (s *Subsystem) flushNamespaceIDs(ids []uint32) error {
	var first error
	for _, id := range ids {
		ns := s.Namespace(id)
		if ns == nil || !ns.hold() {
			continue // removed meanwhile: its removal flushes it
		}
		err := ns.Backend.Flush()
		ns.unhold()
		if err != nil && first == nil {
			first = fmt.Errorf("namespace %d: %w", id, err)
		}
	}
	return first
}
