package config

import (
	"fmt"
	"slices"
)

// Per-host namespace visibility: namespaces[].hosts. Left out, every host
// the subsystem allows sees the namespace; given, only those listed do,
// and an empty list (hosts: []) hides it from every host until one is
// added. The empty list is what a namespace created for nobody yet needs,
// and what taking its last host away leaves, so no other key says it.

// Limited reports whether the namespace is limited to some hosts.
func (ns Namespace) Limited() bool { return ns.Hosts != nil }

// VisibleTo is the hosts the namespace is limited to: nil when it is not
// limited, empty (not nil) when no host sees it.
func (ns Namespace) VisibleTo() []string {
	if ns.Hosts == nil {
		return nil
	}
	return append([]string{}, *ns.Hosts...)
}

// SetVisibleTo limits the namespace to hosts (nil: no limit).
func (ns *Namespace) SetVisibleTo(hosts []string) {
	if hosts == nil {
		ns.Hosts = nil
		return
	}
	h := append([]string{}, hosts...)
	ns.Hosts = &h
}

// SameHosts reports whether two hosts lists limit alike: both left out,
// or the same hosts in any order.
func SameHosts(a, b *[]string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return sameSet(*a, *b)
}

func cloneHosts(h *[]string) *[]string {
	if h == nil {
		return nil
	}
	c := slices.Clone(*h)
	if c == nil {
		c = []string{}
	}
	return &c
}

// namespaceHosts checks a namespace's hosts: NQNs, once each, and each
// one its subsystem allows in.
func (v *validator) namespaceHosts(path string, ns Namespace, s Subsystem) {
	if ns.Hosts == nil {
		return
	}
	seen := map[string]bool{}
	for k, h := range *ns.Hosts {
		hp := fmt.Sprintf("%s[%d]", path, k)
		switch {
		case checkNQN(h) != "":
			v.add(hp, "%s", checkNQN(h))
		case seen[h]:
			v.add(hp, "%q is listed twice", h)
		case !s.AllowAnyHost && !slices.ContainsFunc(s.Hosts, func(a Host) bool { return a.NQN == h }):
			v.add(hp, "%q is not one of the subsystem's hosts: add it to the subsystem's hosts first, or set allow_any_host: true", h)
		}
		seen[h] = true
	}
}
