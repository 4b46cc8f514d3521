package config

import (
	"maps"
	"slices"
)

// Plan is what changes between a running configuration and the next: what
// a reload applies, item by item, so that everything else keeps running.
type Plan struct {
	DelPorts, AddPorts []Port      // a port whose listener changed is deleted and added
	ANAPorts           []Port      // kept, with other ANA states
	ReferralPorts      []Port      // kept, with other referrals
	DelSubsystems      []Subsystem // removed, or rebuilt (serial or model changed)
	AddSubsystems      []Subsystem
	DelNamespaces      []NamespaceRef // in subsystems kept; a changed one is deleted and added
	AddNamespaces      []NamespaceRef
	ResizeNamespaces   []NamespaceRef // in subsystems kept: only the size differs
	Regroup            []NamespaceRef // kept, in another ANA group: moved in place
	Visibility         []NamespaceRef // kept, with other hosts: shown or hidden in place
	Reservations       []NamespaceRef // kept, with reservations turned on or off in place
	Remeasure          []NamespaceRef // block and rbd namespaces kept: the device or image may have grown
	Access             []Subsystem    // kept, with other hosts or allow_any_host
	Links              []Subsystem    // kept, with other ports
	Limits             []Subsystem    // kept, with other max_controllers, max_io_queues or cntlid range
	QoS                []NamespaceRef // kept, with other qos limits: changed in place
}

// NamespaceRef is a namespace and the NQN of its subsystem.
type NamespaceRef struct {
	NQN string
	Namespace
}

// Diff compares two validated configurations.
func Diff(cur, next *Config) Plan {
	var p Plan
	p.diffPorts(cur.Ports, next.Ports)
	curSubs := map[string]Subsystem{}
	for _, s := range cur.Subsystems {
		curSubs[s.NQN] = s
	}
	nextSubs := map[string]bool{}
	for _, s := range next.Subsystems {
		nextSubs[s.NQN] = true
		old, ok := curSubs[s.NQN]
		if !ok || old.Serial != s.Serial || old.Model != s.Model {
			// Identify data changes only with a new controller.
			if ok {
				p.DelSubsystems = append(p.DelSubsystems, old)
			}
			p.AddSubsystems = append(p.AddSubsystems, s)
			continue
		}
		p.diffSubsystem(old, s)
	}
	for _, s := range cur.Subsystems {
		if !nextSubs[s.NQN] {
			p.DelSubsystems = append(p.DelSubsystems, s)
		}
	}
	return p
}

// diffPorts plans the port changes: a port whose listener settings changed
// is deleted and added again; one with only other ANA states or referrals
// is kept, with its connections.
func (p *Plan) diffPorts(cur, next []Port) {
	curPorts := map[uint16]Port{}
	for _, pc := range cur {
		curPorts[pc.ID] = pc
	}
	nextPorts := map[uint16]bool{}
	for _, pc := range next {
		nextPorts[pc.ID] = true
		old, ok := curPorts[pc.ID]
		if ok && old.SameListener(pc) {
			if !maps.Equal(old.ANA, pc.ANA) {
				p.ANAPorts = append(p.ANAPorts, pc)
			}
			if !slices.Equal(old.Referrals, pc.Referrals) {
				p.ReferralPorts = append(p.ReferralPorts, pc)
			}
			continue
		}
		if ok {
			p.DelPorts = append(p.DelPorts, old)
		}
		p.AddPorts = append(p.AddPorts, pc)
	}
	for _, pc := range cur {
		if !nextPorts[pc.ID] {
			p.DelPorts = append(p.DelPorts, pc)
		}
	}
}

// diffSubsystem plans the changes to a subsystem kept with its identity:
// access, links, limits and namespaces.
func (p *Plan) diffSubsystem(old, s Subsystem) {
	// Key files are read again at every change: a rotated key applies
	// without touching the configuration.
	if old.AllowAnyHost != s.AllowAnyHost || !sameSetFunc(old.Hosts, s.Hosts, Host.Equal) || s.keyFiles() ||
		!slices.Equal(old.DHCHAPHashes, s.DHCHAPHashes) || !slices.Equal(old.DHCHAPDHGroups, s.DHCHAPDHGroups) {
		p.Access = append(p.Access, s)
	}
	if !sameSet(old.Ports, s.Ports) {
		p.Links = append(p.Links, s)
	}
	if old.MaxControllers != s.MaxControllers || old.MaxIOQueues != s.MaxIOQueues ||
		old.CntlidMin != s.CntlidMin || old.CntlidMax != s.CntlidMax {
		p.Limits = append(p.Limits, s)
	}
	oldNS := map[uint32]Namespace{}
	for _, n := range old.Namespaces {
		oldNS[n.NSID] = n
	}
	keep := map[uint32]bool{}
	for _, n := range s.Namespaces {
		if p.keepNamespace(s.NQN, oldNS, n) {
			keep[n.NSID] = true
			continue
		}
		p.AddNamespaces = append(p.AddNamespaces, NamespaceRef{s.NQN, n})
	}
	for _, n := range old.Namespaces {
		if !keep[n.NSID] {
			p.DelNamespaces = append(p.DelNamespaces, NamespaceRef{s.NQN, n})
		}
	}
}

// keepNamespace reports whether namespace n of subsystem nqn stays as the
// host knows it: unchanged (a block device is measured again, it may have
// grown), or changed in size only (resized in place); either may also have
// moved to another ANA group, which changes in place too.
func (p *Plan) keepNamespace(nqn string, oldNS map[uint32]Namespace, n Namespace) bool {
	o, ok := oldNS[n.NSID]
	if !ok {
		return false
	}
	regroup := o.Group() != n.Group()
	o.ANAGroup = n.ANAGroup // compared above, where 0 is the default group
	relimit := !SameHosts(o.Hosts, n.Hosts)
	o.Hosts = n.Hosts // compared above, by value
	reserve := o.Reservations.On() != n.Reservations.On()
	o.Reservations = n.Reservations // changes in place
	requos := o.QoS != n.QoS
	o.QoS = n.QoS
	keep := false
	switch resized := o; {
	case o == n:
		if n.Backend == "block" || n.Backend == "rbd" {
			p.Remeasure = append(p.Remeasure, NamespaceRef{nqn, n})
		}
		keep = true
	case n.Backend != "block":
		resized.Size = n.Size
		if resized == n {
			// Hosts keep the namespace and see its new size.
			p.ResizeNamespaces = append(p.ResizeNamespaces, NamespaceRef{nqn, n})
			keep = true
		}
	}
	if keep && regroup {
		p.Regroup = append(p.Regroup, NamespaceRef{nqn, n})
	}
	if keep && relimit {
		p.Visibility = append(p.Visibility, NamespaceRef{nqn, n})
	}
	if keep && reserve {
		p.Reservations = append(p.Reservations, NamespaceRef{nqn, n})
	}
	if keep && requos {
		p.QoS = append(p.QoS, NamespaceRef{nqn, n})
	}
	return keep
}

func sameSet[T comparable](a, b []T) bool {
	return sameSetFunc(a, b, func(x, y T) bool { return x == y })
}

// sameSetFunc is sameSet for elements compared by eq.
func sameSetFunc[T any](a, b []T, eq func(T, T) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y T) bool { return eq(x, y) }) {
			return false
		}
	}
	return true
}

// keyFiles reports whether a host of s keeps a secret in a file.
func (s Subsystem) keyFiles() bool {
	for _, h := range s.Hosts {
		if h.DHCHAPKeyFile != "" || h.DHCHAPCtrlKeyFile != "" {
			return true
		}
	}
	return false
}
