package fabrics

import (
	"fmt"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

// Per-host namespace visibility. A namespace may be limited to some of the
// hosts its subsystem allows in; to the controllers of every other host it
// does not exist: not in the Active Namespace ID list, zeros for Identify
// Namespace, no descriptors, no Changed Namespace List entry nor event, not
// in the ANA log nor its events and change count, not in the SMART log's
// counters nor in Identify VWC, every command naming it answers as for an
// absent one, and its I/O commands fail with Invalid Namespace or Format.
//
// Each controller holds what it must not see as an immutable bitmap,
// resolved when a controller is created and whenever a namespace's hosts
// change, and swapped whole: the I/O path reads it with one atomic load,
// and a controller from whom nothing is hidden has none at all.

// hiddenSet is the namespace IDs hidden from one controller.
type hiddenSet [nvme.MaxNamespaces/64 + 1]uint64

func (h *hiddenSet) has(nsid uint32) bool {
	return h != nil && nsid <= nvme.MaxNamespaces && h[nsid/64]&(1<<(nsid%64)) != 0
}

// sees reports whether the controller may see namespace nsid.
func (c *Controller) sees(nsid uint32) bool {
	return !c.hidden.Load().has(nsid)
}

// SetNamespaceHosts limits namespace nsid to hosts, every one of which the
// subsystem should allow (the others never connect); nil lifts the limit,
// and an empty list hides the namespace from every host. It may be called
// before the namespace is added, so that no host outside hosts ever sees
// it. Each controller whose view of a published namespace changes gets a
// Changed Namespace List entry and a Namespace Attribute Changed event;
// the others hear nothing. Hiding keeps the fence (fence.go): the hidden
// hosts' commands waiting on the namespace's QoS limit end with Invalid
// Namespace or Format, as do their next ones, and it returns once their
// writes already in the backend are out. If one is not within 10 s, the
// namespace stays hidden and the error says a write may still land.
func (s *Subsystem) SetNamespaceHosts(nsid uint32, hosts []string) error {
	if nsid == 0 || nsid > nvme.MaxNamespaces {
		return fmt.Errorf("namespace id %d out of range 1..%d", nsid, nvme.MaxNamespaces)
	}
	s.mu.Lock()
	if hosts == nil {
		delete(s.visibility, nsid)
	} else {
		if s.visibility == nil {
			s.visibility = map[uint32]map[string]bool{}
		}
		set := make(map[string]bool, len(hosts))
		for _, h := range hosts {
			set[h] = true
		}
		s.visibility[nsid] = set
	}
	changed := s.resolveViewsLocked()
	ns := s.Namespace(nsid)
	s.mu.Unlock()
	if ns == nil {
		return nil
	}
	// Only nsid's limit changed: a controller whose view changed gained
	// or lost nsid.
	for _, v := range changed {
		if v.next.has(nsid) {
			v.c.dropResvNotices(nsid)
		}
		v.c.namespaceChanged(nsid)
		v.c.log.WithFields(logrus.Fields{"nsid": nsid, "visible": !v.next.has(nsid)}).Info("namespace visibility changed")
	}
	// By host, not by the controllers' views: a controller that is
	// closing is no longer in the subsystem's list, so its view was not
	// updated, and still has its commands counted.
	hidden := func(c *Controller) bool { return hosts != nil && !slices.Contains(hosts, c.HostNQN) }
	if !ns.fence(hidden, fenceTimeout) {
		s.log().WithFields(logrus.Fields{"subsystem": s.NQN, "nsid": nsid, "timeout": fenceTimeout}).Warn("namespace hidden, but a write of a host it is hidden from has not left the backend in time")
		return fmt.Errorf("namespace %d is hidden, but a write of a host it is now hidden from has not left the backend after %v and may still land", nsid, fenceTimeout)
	}
	return nil
}

// NamespaceHosts reports the hosts namespace nsid is limited to, sorted,
// and whether it is limited at all.
func (s *Subsystem) NamespaceHosts(nsid uint32) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, ok := s.visibility[nsid]
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(set))
	for h := range set {
		out = append(out, h)
	}
	slices.Sort(out)
	return out, true
}

// forgetNamespaceHosts lifts the limit of a removed namespace: an ID used
// again starts visible to every host unless its new hosts say otherwise.
// Its hosts are kept until its counters are final, which count in their
// SMART log only (retireNamespace).
func (s *Subsystem) forgetNamespaceHosts(nsid uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if set, ok := s.visibility[nsid]; ok {
		s.Stats.mu.Lock()
		if s.Stats.removing == nil {
			s.Stats.removing = map[uint32]map[string]bool{}
		}
		s.Stats.removing[nsid] = set
		s.Stats.mu.Unlock()
		delete(s.visibility, nsid)
		s.resolveViewsLocked()
	}
}

// hiddenFromLocked is what host may not see: nil when it sees everything.
// Called with s.mu held.
func (s *Subsystem) hiddenFromLocked(host string) *hiddenSet {
	var h *hiddenSet
	for nsid, set := range s.visibility {
		if set[host] {
			continue
		}
		if h == nil {
			h = new(hiddenSet)
		}
		h[nsid/64] |= 1 << (nsid % 64)
	}
	return h
}

// viewChange is a controller's view before and after a change.
type viewChange struct {
	c          *Controller
	prev, next *hiddenSet
}

// resolveViewsLocked gives every controller its view anew and returns the
// controllers whose view changed. Called with s.mu held.
func (s *Subsystem) resolveViewsLocked() []viewChange {
	var changed []viewChange
	for _, c := range s.controllers {
		next := s.hiddenFromLocked(c.HostNQN)
		if prev := c.hidden.Swap(next); !sameHidden(prev, next) {
			changed = append(changed, viewChange{c, prev, next})
		}
	}
	return changed
}

func sameHidden(a, b *hiddenSet) bool {
	switch {
	case a == nil && b == nil:
		return true
	case a == nil || b == nil:
		return false
	}
	return *a == *b
}

// visibleNamespaceIDs lists the active namespace IDs the controller sees,
// ascending.
func (c *Controller) visibleNamespaceIDs() []uint32 {
	ids := c.Subsystem.NamespaceIDs()
	if c.hidden.Load() == nil {
		return ids
	}
	return slices.DeleteFunc(slices.Clone(ids), func(id uint32) bool { return !c.sees(id) })
}

// visibleNamespace is namespace nsid if the controller sees it, or nil.
func (c *Controller) visibleNamespace(nsid uint32) *Namespace {
	if !c.sees(nsid) {
		return nil
	}
	return c.Subsystem.Namespace(nsid)
}

// volatileCacheFor reports whether a namespace host sees keeps completed
// writes in a volatile cache: Identify VWC of the host's new controller.
// A cache only a hidden namespace has is no concern of the host's, and
// reporting it would tell the host that namespace exists. A namespace with
// a cache the host comes to see later is written through for a controller
// that reported none, as one added later is.
func (s *Subsystem) volatileCacheFor(host string) bool {
	s.mu.Lock()
	hidden := s.hiddenFromLocked(host)
	s.mu.Unlock()
	for _, ns := range s.namespaces.Load().byID {
		if ns.traits.VolatileCache && !hidden.has(ns.ID) {
			return true
		}
	}
	return false
}

// flushNamespaces flushes every namespace the controller sees: a broadcast
// Flush, a shutdown notification or turning the write cache off concerns
// what the host wrote, which is only there.
func (c *Controller) flushNamespaces() error {
	return c.Subsystem.flushNamespaceIDs(c.visibleNamespaceIDs())
}
