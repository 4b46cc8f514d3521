package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
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
		c.log.WithFields(logrus.Fields{"subsystem": r.NQN, "nsid": r.NSID, "hosts": visibilityNote(r.Hosts)}).Info("namespace hosts changed")
	}
}

// visibilityNote says who sees a namespace, for logs and ctl list.
func visibilityNote(hosts *[]string) string {
	switch {
	case hosts == nil:
		return "every allowed host"
	case len(*hosts) == 0:
		return "no host"
	}
	return strings.Join(*hosts, ", ")
}

// The API methods (docs/operations.md: The management API).
func init() {
	methods["add_namespace_host"] = typed((*session).addNamespaceHost, true)
	methods["remove_namespace_host"] = typed((*session).removeNamespaceHost, true)
}

type namespaceHostParams struct {
	NQN  string `json:"nqn"`
	NSID uint32 `json:"nsid"`
	Host string `json:"host"`
}

// addNamespaceHost shows a namespace limited to some hosts to one more.
func (s *session) addNamespaceHost(p namespaceHostParams) (changeResult, error) {
	return s.editNamespaceHosts(p, true)
}

// removeNamespaceHost hides a namespace from one of the hosts it is
// limited to; without its last host, no host sees it.
func (s *session) removeNamespaceHost(p namespaceHostParams) (changeResult, error) {
	return s.editNamespaceHosts(p, false)
}

func (s *session) editNamespaceHosts(p namespaceHostParams, add bool) (changeResult, error) {
	if p.Host == "" {
		return changeResult{}, paramError("host", "invalid params: host is required")
	}
	return s.api.change(func(c *config.Config) (string, error) {
		i, j, err := findNamespace(c, p.NQN, p.NSID)
		if err != nil {
			return "", err
		}
		nc := &c.Subsystems[i].Namespaces[j]
		path := fmt.Sprintf("subsystems[%d].namespaces[%d].hosts", i, j)
		if !nc.Limited() {
			if add {
				return "", alreadyExists("host", "namespace %d of %s has no hosts list: every host the subsystem allows sees it already (to limit it, set_namespace with hosts)", p.NSID, p.NQN)
			}
			return "", notFound("host", "namespace %d of %s has no hosts list: every host the subsystem allows sees it (to limit it, set_namespace with hosts)", p.NSID, p.NQN)
		}
		hosts := nc.VisibleTo()
		k := slices.Index(hosts, p.Host)
		switch {
		case add && k >= 0:
			return "", alreadyExists("host", "host %s already sees namespace %d of %s", p.Host, p.NSID, p.NQN)
		case add:
			nc.SetVisibleTo(append(hosts, p.Host))
			return fmt.Sprintf("%s[%d]", path, len(hosts)), nil
		case k < 0:
			return "", notFound("host", "host %s is not in the hosts of namespace %d of %s", p.Host, p.NSID, p.NQN)
		}
		nc.SetVisibleTo(slices.Delete(hosts, k, k+1))
		return path, nil
	})
}

// hostsFlag reads -hosts: a comma-separated list of host NQNs; given
// empty (-hosts=), no host sees the namespace.
func hostsFlag(fs *flag.FlagSet, to **[]string) {
	fs.Func("hosts", "limit the namespace to these host `NQNs`, comma-separated; empty (-hosts=): no host sees it until one is added", func(s string) error {
		hosts := []string{}
		if s != "" {
			hosts = strings.Split(s, ",")
		}
		*to = &hosts
		return nil
	})
}

func namespaceHostFlags(method string) func(*flag.FlagSet) func([]string) (*ctlCommand, error) {
	return func(*flag.FlagSet) func([]string) (*ctlCommand, error) {
		return func(pos []string) (*ctlCommand, error) {
			nsid, err := parseNSID(pos[1])
			if err != nil {
				return nil, err
			}
			return ctlEdit(method, namespaceHostParams{NQN: pos[0], NSID: nsid, Host: pos[2]})
		}
	}
}

// namespaceHosts is who the running target shows namespace nsid to, for
// get_state: nil when every allowed host sees it.
func namespaceHosts(s *fabrics.Subsystem, nsid uint32) *[]string {
	hosts, limited := s.NamespaceHosts(nsid)
	if !limited {
		return nil
	}
	return &hosts
}

// listHosts is ctl list's note on a limited namespace.
func listHosts(hosts *[]string) string {
	if hosts == nil {
		return ""
	}
	safe := []string{}
	for _, h := range *hosts {
		safe = append(safe, termSafe(h))
	}
	return ", hosts: " + visibilityNote(&safe)
}
