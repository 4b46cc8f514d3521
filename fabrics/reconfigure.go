package fabrics

import (
	"fmt"
	"slices"
	"time"

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
	subs := make([]*Subsystem, 0, len(t.subsystems)+1)
	for _, s := range t.subsystems {
		subs = append(subs, s)
	}
	subs = append(subs, t.discovery)
	t.discoveryChanged()
	t.mu.Unlock()
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
	t.discoveryChanged()
	t.mu.Unlock()
	s.disconnectAll()
	for _, id := range s.NamespaceIDs() {
		if _, err := s.RemoveNamespace(id); err != nil {
			return err
		}
	}
	return nil
}

// RemoveNamespace unpublishes namespace nsid: connected hosts get a
// namespace-attribute-changed event and rescan. Commands already
// dispatched to it finish first; then its backend is closed.
func (s *Subsystem) RemoveNamespace(nsid uint32) (*Namespace, error) {
	s.mu.Lock()
	old := s.namespaces.Load()
	ns := old.byID[nsid]
	if ns == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("namespace %d does not exist", nsid)
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
	s.namespacesChanged(nsid)
	if !s.drain(ns, drainTimeout) {
		s.log().WithFields(logrus.Fields{"subsystem": s.NQN, "nsid": nsid}).
			Warn("namespace removed with commands still in flight after 10 s; they will fail")
	}
	if err := ns.Backend.Close(); err != nil {
		s.log().WithError(err).WithFields(logrus.Fields{"subsystem": s.NQN, "nsid": nsid}).Warn("closing namespace backend")
	}
	return ns, nil
}

// drain waits until no queue has a command on ns in flight.
func (s *Subsystem) drain(ns *Namespace, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if s.inflight(ns) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *Subsystem) inflight(ns *Namespace) int64 {
	var n int64
	for _, c := range s.Controllers() {
		c.mu.Lock()
		for _, q := range c.queues {
			if q == nil {
				continue
			}
			if list := q.nsStats.Load(); list != nil {
				for _, e := range *list {
					if e.ns == ns {
						n += e.stats.Inflight.Load()
					}
				}
			}
		}
		c.mu.Unlock()
	}
	return n
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

// Hosts lists the allowed host NQNs.
func (s *Subsystem) Hosts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.hosts))
	for h := range s.hosts {
		out = append(out, h)
	}
	return out
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
		t.mu.Lock()
		t.discoveryChanged()
		t.mu.Unlock()
	}
}

func (s *Subsystem) log() *logrus.Entry {
	if s.target != nil {
		return s.target.Log
	}
	return logrus.NewEntry(logrus.StandardLogger())
}

// claim counts r as in flight on ns, unless ns is being removed.
func (q *Queue) claim(r *Request, ns *Namespace) nvme.Status {
	st := q.statsFor(ns)
	st.Inflight.Add(1)
	if ns.removed.Load() {
		st.Inflight.Add(-1)
		return nvme.StatusInvalidNamespace | nvme.DNR
	}
	r.ns, r.nsStats = ns, st
	return 0
}
