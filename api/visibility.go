package api

import (
	"fmt"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
)

// The API methods (docs/operations.md: The management API).
func init() {
	methods["add_namespace_host"] = typed((*session).addNamespaceHost, true)
	methods["remove_namespace_host"] = typed((*session).removeNamespaceHost, true)
}

type NamespaceHostParams struct {
	NQN  string `json:"nqn"`
	NSID uint32 `json:"nsid"`
	Host string `json:"host"`
}

// addNamespaceHost shows a namespace limited to some hosts to one more.
func (s *session) addNamespaceHost(p NamespaceHostParams) (ChangeResult, error) {
	return s.editNamespaceHosts(p, true)
}

// removeNamespaceHost hides a namespace from one of the hosts it is
// limited to; without its last host, no host sees it.
func (s *session) removeNamespaceHost(p NamespaceHostParams) (ChangeResult, error) {
	return s.editNamespaceHosts(p, false)
}

func (s *session) editNamespaceHosts(p NamespaceHostParams, add bool) (ChangeResult, error) {
	if p.Host == "" {
		return ChangeResult{}, paramError("host", "invalid params: host is required")
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

// namespaceHosts is who the running target shows namespace nsid to, for
// get_state: nil when every allowed host sees it.
func namespaceHosts(s *fabrics.Subsystem, nsid uint32) *[]string {
	hosts, limited := s.NamespaceHosts(nsid)
	if !limited {
		return nil
	}
	return &hosts
}
