package api

import (
	"fmt"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// findNamespace returns the indexes of subsystem nqn and of its namespace nsid in c.
func findNamespace(c *config.Config, nqn string, nsid uint32) (int, int, error) {
	i, err := findSubsystem(c, nqn)
	if err != nil {
		return -1, -1, err
	}
	if nsid == 0 {
		return -1, -1, paramError("nsid", "invalid params: nsid is required")
	}
	j := slices.IndexFunc(c.Subsystems[i].Namespaces, func(n config.Namespace) bool { return n.NSID == nsid })
	if j < 0 {
		return -1, -1, notFound("nsid", "no namespace %d in %s", nsid, nqn)
	}
	return i, j, nil
}

func (s *session) addNamespace(p NamespaceParams) (ChangeResult, error) {
	nsid := p.NSID
	res, err := s.api.change(func(c *config.Config) (string, error) {
		i, err := findSubsystem(c, p.NQN)
		if err != nil {
			return "", err
		}
		sc := &c.Subsystems[i]
		taken := func(id uint32) bool {
			return slices.ContainsFunc(sc.Namespaces, func(n config.Namespace) bool { return n.NSID == id })
		}
		if nsid == 0 { // the lowest free NSID
			for nsid = 1; taken(nsid); nsid++ {
			}
		} else if taken(nsid) {
			return "", alreadyExists("nsid", "namespace %d already exists in %s", nsid, p.NQN)
		}
		sc.Namespaces = append(sc.Namespaces, config.Namespace{
			NSID: nsid, Backend: p.Backend, Path: p.Path, Size: config.Size(p.Size), BlockSize: p.BlockSize,
			ReadOnly: p.ReadOnly, Buffered: p.Buffered, UUID: p.UUID, ANAGroup: p.ANAGroup,
			Pool: p.Pool, RadosNamespace: p.RadosNamespace, Image: p.Image, Create: p.Create,
			Reservations: switchOf(p.Reservations),
		})
		if p.Hosts != nil {
			sc.Namespaces[len(sc.Namespaces)-1].SetVisibleTo(*p.Hosts)
		}
		return fmt.Sprintf("subsystems[%d].namespaces[%d]", i, len(sc.Namespaces)-1), nil
	})
	res.NSID = nsid
	return res, err
}

// setNamespace resizes a namespace, or moves it to another ANA group, in
// place: hosts keep it and see the new size or group.
func (s *session) setNamespace(p NamespaceSet) (ChangeResult, error) {
	if p.Size == nil && p.ANAGroup == nil && p.Hosts == nil && p.Reservations == nil && p.QoS == nil {
		return ChangeResult{}, paramError("size", "invalid params: nothing to set (size, ana_group, hosts, reservations, qos)")
	}
	return s.api.change(func(c *config.Config) (string, error) {
		i, j, err := findNamespace(c, p.NQN, p.NSID)
		if err != nil {
			return "", err
		}
		nc := &c.Subsystems[i].Namespaces[j]
		if p.Size != nil {
			nc.Size = config.Size(*p.Size)
		}
		nc.ANAGroup = orDefault(p.ANAGroup, nc.ANAGroup)
		if p.Hosts != nil {
			nc.SetVisibleTo(*p.Hosts)
		}
		if p.Reservations != nil {
			nc.Reservations = config.SwitchOf(*p.Reservations)
		}
		if p.QoS != nil {
			p.QoS.applyTo(&nc.QoS)
		}
		return fmt.Sprintf("subsystems[%d].namespaces[%d]", i, j), nil
	})
}

func (s *session) removeNamespace(p NamespaceRef) (ChangeResult, error) {
	return s.api.change(func(c *config.Config) (string, error) {
		i, j, err := findNamespace(c, p.NQN, p.NSID)
		if err != nil {
			return "", err
		}
		c.Subsystems[i].Namespaces = slices.Delete(c.Subsystems[i].Namespaces, j, j+1)
		return "", nil
	})
}

// addHost allows a host NQN into a subsystem.
func (s *session) addHost(p HostParams) (ChangeResult, error) { return s.editHosts(p, true) }

// removeHost takes a host NQN off a subsystem's allow-list; its
// controllers are disconnected unless the subsystem allows any host.
func (s *session) removeHost(p HostParams) (ChangeResult, error) { return s.editHosts(p, false) }

// findHost is subsystem nqn's index in c and the subsystem, with host's
// index on its allow-list (-1: not on it).
func findHost(c *config.Config, nqn, host string) (int, *config.Subsystem, int, error) {
	i, err := findSubsystem(c, nqn)
	if err != nil {
		return 0, nil, 0, err
	}
	sc := &c.Subsystems[i]
	return i, sc, slices.IndexFunc(sc.Hosts, func(h config.Host) bool { return h.NQN == host }), nil
}

// setHost replaces a host's DH-HMAC-CHAP keys. Its connected controllers
// stay; the keys apply to its next authentication.
func (s *session) setHost(p HostParams) (ChangeResult, error) {
	return s.api.change(func(c *config.Config) (string, error) {
		i, sc, j, err := findHost(c, p.NQN, p.Host)
		if err != nil {
			return "", err
		}
		if j < 0 {
			return "", notFound("host", "host %s is not on the allow-list of %s", p.Host, p.NQN)
		}
		sc.Hosts[j] = p.entry()
		return fmt.Sprintf("subsystems[%d].hosts[%d]", i, j), nil
	})
}

func (s *session) editHosts(p HostParams, add bool) (ChangeResult, error) {
	if !add && !p.entry().Plain() {
		return ChangeResult{}, paramError("dhchap_key", "invalid params: remove_host takes no keys")
	}
	return s.api.change(func(c *config.Config) (string, error) {
		i, sc, j, err := findHost(c, p.NQN, p.Host)
		if err != nil {
			return "", err
		}
		switch {
		case add && j >= 0:
			return "", alreadyExists("host", "host %s is already allowed into %s", p.Host, p.NQN)
		case add:
			sc.Hosts = append(sc.Hosts, p.entry())
			return fmt.Sprintf("subsystems[%d].hosts[%d]", i, len(sc.Hosts)-1), nil
		case j < 0:
			return "", notFound("host", "host %s is not on the allow-list of %s", p.Host, p.NQN)
		default:
			sc.Hosts = slices.Delete(sc.Hosts, j, j+1)
		}
		return "", nil
	})
}
