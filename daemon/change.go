package daemon

import (
	"fmt"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// change is one apply in progress: the difference to make, what prepare
// opened for it, and the configuration that will be running afterwards.
// It runs with d.mu held.
type change struct {
	d         *Daemon
	log       *logrus.Entry
	cur, next *config.Config
	plan      config.Plan

	// Filled by prepare; abort closes them, commit hands them over.
	ready     []openedNamespace
	later     []config.NamespaceRef // open once the backend they replace closed
	listeners map[uint16]portListener
	ports     map[uint16]*fabrics.Port

	// Filled by commit: what really runs, and what could not be done.
	applied  *config.Config
	problems []error
	refused  map[string]bool // NQNs of new subsystems the target refused
}

// openedNamespace is a namespace whose backend is open, waiting to be
// added to subsystem nqn.
type openedNamespace struct {
	nqn string
	ns  *fabrics.Namespace
}

func newChange(d *Daemon, next *config.Config) *change {
	return &change{
		d: d, log: d.log, cur: d.cfg, next: next, plan: config.Diff(listening(d), next),
		listeners: map[uint16]portListener{}, ports: map[uint16]*fabrics.Port{},
		applied: next.Clone(), refused: map[string]bool{},
	}
}

// listening is the running configuration without the ports that do not
// listen: a changed port that could not be set up again stays in the
// running configuration, and the difference to the next one adds it
// again, so every change retries it.
func listening(d *Daemon) *config.Config {
	down := func(p config.Port) bool { _, ok := d.listeners[p.ID]; return !ok }
	if !slices.ContainsFunc(d.cfg.Ports, down) {
		return d.cfg
	}
	c := d.cfg.Clone()
	c.Ports = slices.DeleteFunc(c.Ports, down)
	return c
}

// prepare does everything that can fail the whole change: it opens new
// backends and listens on new ports. The running target is untouched.
func (c *change) prepare() error {
	if err := c.checkRegroup(); err != nil {
		return err
	}
	if err := c.openBackends(); err != nil {
		return err
	}
	return c.listenNewPorts()
}

// checkRegroup refuses to move a namespace into or out of a gateway group
// in place: the lease of one group would hand it over while commands
// taken under the other are in flight, with nobody draining or fencing
// them.
func (c *change) checkRegroup() error {
	gw := c.next.Gateway
	for _, r := range c.plan.Regroup {
		i, j := findNS(c.cur, r.NQN, r.NSID)
		if i < 0 {
			continue
		}
		from, to := c.cur.Subsystems[i].Namespaces[j].Group(), r.Group()
		if gw.HasGroup(from) || gw.HasGroup(to) {
			return fmt.Errorf("%s.ana_group: the namespace cannot move from ANA group %d to %d while it is served: a gateway group's namespaces (gateway.groups: %v) change groups only by removing the namespace and adding it again", nsPath(c.next, r.NQN, r.NSID), from, to, gw.GroupIDs())
		}
	}
	return nil
}

// openBackends opens the backends of new namespaces. One that replaces a
// backend being removed (same path or image) waits until that one closed, in
// commit: a block device is opened exclusively.
func (c *change) openBackends() error {
	closing := map[string]bool{}
	for _, r := range c.plan.DelNamespaces {
		closing[r.Source()] = true
	}
	for _, s := range c.plan.DelSubsystems {
		for _, n := range s.Namespaces {
			closing[n.Source()] = true
		}
	}
	adds := slices.Clone(c.plan.AddNamespaces)
	for _, s := range c.plan.AddSubsystems {
		for _, n := range s.Namespaces {
			adds = append(adds, config.NamespaceRef{NQN: s.NQN, Namespace: n})
		}
	}
	for _, r := range adds {
		if r.Source() != "" && closing[r.Source()] {
			c.later = append(c.later, r)
			continue
		}
		ns, err := openNamespace(r.NQN, r.Namespace, c.next.Gateway, c.d.resvDir, c.d.log)
		if err != nil {
			return fmt.Errorf("%s: %w", nsPath(c.next, r.NQN, r.NSID), err)
		}
		c.ready = append(c.ready, openedNamespace{r.NQN, ns})
	}
	return nil
}

// listenNewPorts listens on added ports, except those taking over the
// address of a port going away: commit listens there once it is free.
func (c *change) listenNewPorts() error {
	inUse := map[string]bool{}
	for _, pc := range c.plan.DelPorts {
		inUse[addrKey(pc)] = true
	}
	for _, pc := range c.plan.AddPorts {
		fp, err := newPort(pc)
		if err != nil {
			return fmt.Errorf("%s.address: %w", portPath(c.next, pc.ID), err)
		}
		c.ports[pc.ID] = fp
		if inUse[addrKey(pc)] {
			continue
		}
		l, err := openListener(c.d.target, fp, c.log)
		if err != nil {
			return fmt.Errorf("%s: %w", portPath(c.next, pc.ID), err)
		}
		c.listeners[pc.ID] = l
	}
	return nil
}

// commit changes the running target. Nothing here fails the whole change:
// what cannot be applied is named in c.problems and left out of c.applied.
func (c *change) commit() {
	c.removeOld()
	c.addPorts()
	c.updateReferrals()
	c.addSubsystems()
	c.resize()
	c.retune()
	c.setANA()
	c.setVisibility()
	c.setQoS()
	c.addNamespaces()
	c.applyDaemonSettings()
}

// problem records what commit could not do; drop, if not nil, takes the
// item out of the running configuration.
func (c *change) problem(err error, drop func(*config.Config)) {
	c.problems = append(c.problems, err)
	if drop != nil {
		drop(c.applied)
	}
}

// addrKey names the address a port listens on.
func addrKey(pc config.Port) string {
	return fmt.Sprintf("%s %s:%d", pc.Transport, pc.Address, pc.Port)
}
