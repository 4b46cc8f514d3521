package fabrics

import (
	"fmt"
	"maps"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

// Asymmetric Namespace Access. Each namespace belongs to an ANA group
// (1..nvme.MaxANAGroups, default 1), and each port gives every group a
// state. A host connected through a port reads the states in the ANA log
// page; I/O to a namespace whose group is inaccessible, in persistent loss
// or changing on the port fails with the path related status of the
// state, so that the host's multipath sends it down another path.
//
// A port's states are an immutable table swapped whole: the I/O path
// reads them with one atomic load of a pointer no queue writes.

// DefaultANAGroup is the group of a namespace that names none.
const DefaultANAGroup = 1

// anaTable is the state of every group on one port, indexed by group ID.
type anaTable [nvme.MaxANAGroups + 1]nvme.ANAState

// anaTransitionTime is Identify ANATT: how long, in seconds, a group stays
// in the change state at most. The Linux host resets the controller when
// a group is still changing after twice as long.
const anaTransitionTime = 10

// ANAState is the state of group g on the port: optimized unless set.
func (p *Port) ANAState(g uint32) nvme.ANAState {
	t := p.ana.Load()
	if t == nil || g > nvme.MaxANAGroups {
		return nvme.ANAOptimized
	}
	return t[g]
}

// ANAStates is every group's state on the port that is not optimized.
func (p *Port) ANAStates() map[uint32]nvme.ANAState {
	out := map[uint32]nvme.ANAState{}
	if t := p.ana.Load(); t != nil {
		for g := uint32(1); g <= nvme.MaxANAGroups; g++ {
			if t[g] != nvme.ANAOptimized {
				out[g] = t[g]
			}
		}
	}
	return out
}

// SetANAStates sets the port's states before it is added to a target:
// groups not in states are optimized.
func (p *Port) SetANAStates(states map[uint32]nvme.ANAState) error {
	t, err := newANATable(states)
	if err != nil {
		return fmt.Errorf("port %d: %w", p.ID, err)
	}
	p.ana.Store(t)
	return nil
}

func newANATable(states map[uint32]nvme.ANAState) (*anaTable, error) {
	t := new(anaTable)
	for g := range t {
		t[g] = nvme.ANAOptimized
	}
	for _, g := range slices.Sorted(maps.Keys(states)) {
		s := states[g]
		if g < 1 || g > nvme.MaxANAGroups {
			return nil, fmt.Errorf("ANA group %d is out of range 1..%d", g, nvme.MaxANAGroups)
		}
		if !s.Valid() {
			return nil, fmt.Errorf("ANA group %d: invalid state %v", g, s)
		}
		t[g] = s
	}
	return t, nil
}

// SetANAStates changes the states of port id's groups (those not in
// states become optimized). Each group whose state changed is logged, and
// every controller connected through the port that sees a namespace of
// such a group counts an ANA log change and gets an ANA change event (if
// its host enabled them): to the others its ANA log is the same, and the
// event would tell them of namespaces they may not see. Hosts keep their
// connections.
//
// A group that stops being accessible keeps the fence (fence.go): its
// commands from the port's controllers waiting on a QoS limit end with
// the ANA status, and SetANAStates returns once their writes already in
// the backend are out; if one is not within 10 s, the state holds and the
// error says a write may still land.
func (t *Target) SetANAStates(id uint16, states map[uint32]nvme.ANAState) error {
	next, err := newANATable(states)
	if err != nil {
		return fmt.Errorf("port %d: %w", id, err)
	}
	fenced, err := t.updateANA(id, func(*anaTable) *anaTable { return next })
	if err != nil {
		return err
	}
	onPort := func(c *Controller) bool { return c.Port != nil && c.Port.ID == id }
	for _, ns := range fenced {
		if !ns.awaitWrites(onPort, fenceTimeout) {
			return fmt.Errorf("port %d: namespace %d's ANA group is no longer accessible, but a write through the port has not left the backend after %v and may still land", id, ns.ID, fenceTimeout)
		}
	}
	return nil
}

// updateANA replaces port id's table with what next makes of the current
// one, with the pinned groups (ana_pin.go) kept as pinned, under t.mu so
// that no other change of the port's states comes in between. The
// commands waiting on a QoS limit that the new states refuse end; it
// returns the namespaces of the groups that stopped being accessible,
// whose writes in flight the caller may wait for.
func (t *Target) updateANA(id uint16, next func(cur *anaTable) *anaTable) ([]*Namespace, error) {
	t.mu.Lock()
	p := t.ports[id]
	if p == nil {
		t.mu.Unlock()
		return nil, fmt.Errorf("port %d does not exist", id)
	}
	tab := next(p.ana.Load())
	t.pinLocked(tab)
	var changed, closed []uint32 // groups whose state changed, groups no longer accessible
	for g := uint32(1); g <= nvme.MaxANAGroups; g++ {
		if from, to := p.ANAState(g), tab[g]; from != to {
			changed = append(changed, g)
			t.Log.WithFields(logrus.Fields{"port": id, "ana_group": g, "from": from.String(), "to": to.String()}).Info("ANA state changed")
			if from.IOStatus() == 0 && to.IOStatus() != 0 {
				closed = append(closed, g)
			}
		}
	}
	if changed == nil {
		t.mu.Unlock()
		return nil, nil
	}
	p.ana.Store(tab)
	subs := t.subsystemsLocked()
	t.mu.Unlock()
	var fenced []*Namespace
	for _, s := range subs {
		for _, c := range s.Controllers() {
			if c.Port != nil && c.Port.ID == id && c.seesANAGroup(changed) {
				c.anaLogChanged()
			}
		}
		for _, nsid := range s.NamespaceIDs() {
			if ns := s.Namespace(nsid); ns != nil && slices.Contains(closed, ns.ANAGroup()) {
				ns.endRefused()
				fenced = append(fenced, ns)
			}
		}
	}
	return fenced, nil
}

// subsystemsLocked lists the NVM subsystems; called with t.mu held.
func (t *Target) subsystemsLocked() []*Subsystem {
	out := make([]*Subsystem, 0, len(t.subsystems))
	for _, s := range t.subsystems {
		out = append(out, s)
	}
	return out
}

// ANAGroup is the namespace's ANA group.
func (ns *Namespace) ANAGroup() uint32 { return ns.anaGroup.Load() }

// SetANAGroup puts the namespace in group g before it is added to a
// subsystem; Subsystem.SetANAGroup moves a published one.
func (ns *Namespace) SetANAGroup(g uint32) error {
	if g < 1 || g > nvme.MaxANAGroups {
		return fmt.Errorf("namespace %d: ANA group %d is out of range 1..%d", ns.ID, g, nvme.MaxANAGroups)
	}
	ns.anaGroup.Store(g)
	return nil
}

// SetANAGroup moves namespace nsid to group g in place: hosts keep it, and
// every controller that sees it gets an ANA change event, after which
// the Linux host reads the ANA log and takes the namespace's new group and
// state from it.
func (s *Subsystem) SetANAGroup(nsid, g uint32) error {
	ns := s.Namespace(nsid)
	if ns == nil {
		return fmt.Errorf("namespace %d does not exist", nsid)
	}
	from := ns.ANAGroup()
	if from == g {
		return nil
	}
	if err := ns.SetANAGroup(g); err != nil {
		return err
	}
	s.log().WithFields(logrus.Fields{"subsystem": s.NQN, "nsid": nsid, "from": from, "to": g}).Info("namespace moved to another ANA group")
	s.anaChanged(nsid)
	return nil
}

// anaChanged tells the controllers that see namespace nsid of an ANA
// change of it; their Linux hosts then read the ANA log again. The ANA
// log of the others, which list only what they see, is the same.
func (s *Subsystem) anaChanged(nsid uint32) {
	for _, c := range s.Controllers() {
		if c.sees(nsid) {
			c.anaLogChanged()
		}
	}
}

// anaLogChanged counts a change of the controller's ANA log and raises
// the ANA change event. The count is the controller's own: one shared by
// every controller would move with changes of namespaces, ports and
// subsystems its host knows nothing of.
func (c *Controller) anaLogChanged() {
	c.anaChanges.Add(1)
	c.raiseEvent(nvme.AsyncTypeNotice, nvme.AsyncNoticeANAChange, nvme.LogANA)
}

// seesANAGroup reports whether the controller sees a namespace of one of
// groups: only then does a change of theirs change its ANA log.
func (c *Controller) seesANAGroup(groups []uint32) bool {
	s := c.Subsystem
	for _, id := range c.visibleNamespaceIDs() {
		if ns := s.Namespace(id); ns != nil && slices.Contains(groups, ns.ANAGroup()) {
			return true
		}
	}
	return false
}

// anaStatus is the status an I/O command to ns gets on the queue's port:
// 0 where the namespace's group is accessible.
func (q *Queue) anaStatus(ns *Namespace) nvme.Status {
	return q.port.ANAState(ns.ANAGroup()).IOStatus()
}

// anaLog builds the ANA log page for the queue's controller: one
// descriptor per group that has a namespace in the subsystem, ascending,
// with the group's state on the controller's port and, unless rgo (Return
// Groups Only), the IDs of its namespaces.
func (q *Queue) anaLog(page []byte, rgo bool) []byte {
	s := q.ctrl.Subsystem
	chg := q.ctrl.anaChanges.Load()
	l := nvme.ANALog{ChangeCount: chg}
	byGroup := map[uint32][]uint32{}
	for _, id := range q.ctrl.visibleNamespaceIDs() { // ascending
		if ns := s.Namespace(id); ns != nil {
			g := ns.ANAGroup()
			byGroup[g] = append(byGroup[g], id)
		}
	}
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		d := nvme.ANAGroup{ID: g, ChangeCount: chg, State: q.port.ANAState(g)}
		if d.State.IOStatus() == 0 && slices.ContainsFunc(byGroup[g], func(id uint32) bool {
			ns := s.Namespace(id)
			return ns != nil && ns.ReservationUnavailable()
		}) {
			// The namespace's I/O gets ANA Inaccessible (resvCheck):
			// the group says so, or the host would keep choosing it.
			d.State = nvme.ANAInaccessible
		}
		if !rgo {
			d.NSIDs = byGroup[g]
		}
		l.Groups = append(l.Groups, d)
	}
	page = l.Append(page[:0])
	// The page is as long as it can grow, zeros after the last
	// descriptor: the size the Linux host reads in one command, and that
	// libnvme reads in 4 KiB pieces at increasing offsets.
	n := len(page)
	page = slices.Grow(page, anaLogSize-n)[:anaLogSize]
	clear(page[n:])
	return page
}

// anaLogSize is the longest ANA log page: every group, with every
// namespace listed once.
const anaLogSize = nvme.ANALogHdrSize + nvme.MaxANAGroups*nvme.ANAGroupSize + nvme.MaxNamespaces*nvme.ANANSIDSize
