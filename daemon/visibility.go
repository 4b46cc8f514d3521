package daemon

import (
	"fmt"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/sirupsen/logrus"
)

// Per-host namespace visibility (namespaces[].hosts): the change step
// that applies it, and the API methods and ctl commands that edit it.

// setVisibility limits the namespaces about to be added, before they are
// (so that no host outside their hosts ever sees them), and shows or hides
// kept namespaces whose hosts changed, in place: the target raises the
// namespace attribute changed event on exactly the controllers whose view
// changed.
func (c *change) setVisibility() {
	adds := slices.Clone(c.plan.AddNamespaces)
	for _, s := range c.plan.AddSubsystems {
		for _, n := range s.Namespaces {
			adds = append(adds, config.NamespaceRef{NQN: s.NQN, Namespace: n})
		}
	}
	for _, r := range adds {
		if s := c.d.target.Subsystem(r.NQN); s != nil {
			// Always, so that an NSID used again drops an earlier limit.
			if err := s.SetNamespaceHosts(r.NSID, r.VisibleTo()); err != nil {
				c.problem(fmt.Errorf("%s.hosts: %w", nsPath(c.next, r.NQN, r.NSID), err), nil)
			}
		}
	}
	for _, r := range c.plan.Visibility {
		s, err := c.subsystem(r.NQN)
		if err == nil {
			err = s.SetNamespaceHosts(r.NSID, r.VisibleTo())
		}
		if err != nil {
			ci, cj := findNS(c.cur, r.NQN, r.NSID)
			old := c.cur.Subsystems[ci].Namespaces[cj].VisibleTo()
			c.problem(fmt.Errorf("%s.hosts: %w", nsPath(c.next, r.NQN, r.NSID), err), func(a *config.Config) {
				i, j := findNS(a, r.NQN, r.NSID)
				a.Subsystems[i].Namespaces[j].SetVisibleTo(old)
			})
			continue
		}
		c.log.WithFields(logrus.Fields{"subsystem": r.NQN, "nsid": r.NSID, "hosts": config.DescribeHosts(r.Hosts)}).Info("namespace hosts changed")
	}
}
