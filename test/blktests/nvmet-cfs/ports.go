package main

import (
	"fmt"
	"log"
	"net/netip"
	"slices"
	"strconv"
	"syscall"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// ANA states in nvmet's spelling, and the daemon's.
var anaStates = map[string]string{
	"optimized":       "optimized",
	"non-optimized":   "non_optimized",
	"inaccessible":    "inaccessible",
	"persistent-loss": "persistent_loss",
	"change":          "change",
}

// nvmetANAState is the daemon's state name in nvmet's spelling.
func nvmetANAState(daemon string) string {
	for k, v := range anaStates {
		if v == daemon {
			return k
		}
	}
	return daemon
}

// portsDir is ports/: the daemon's ports, named by their IDs. They are
// the daemon's configuration: configfs cannot make or remove them.
func (c *cfs) portsDir() *dir {
	return &dir{c: c, entries: c.fromState("ports", func(st *daemonState) ([]entry, syscall.Errno) {
		var es []entry
		for _, p := range st.Ports {
			es = append(es, entry{strconv.Itoa(int(p.ID)), c.portDir(p.ID), syscall.S_IFDIR})
		}
		return es, 0
	})}
}

// portAttr is a read-only attribute of port id: nvmet refuses to change
// an enabled port's address.
func (c *cfs) portAttr(id uint16, name string, show func(p *daemonPort) string) entry {
	what := fmt.Sprintf("ports/%d/%s", id, name)
	return entry{name, &file{c: c, what: what, show: func() (string, syscall.Errno) {
		p, errno := c.portNow(what, id)
		if errno != 0 {
			return "", errno
		}
		return show(p), 0
	}}, syscall.S_IFREG}
}

// portNow is port id as the daemon has it now; what names the file asking,
// for the log when the daemon cannot be asked.
func (c *cfs) portNow(what string, id uint16) (*daemonPort, syscall.Errno) {
	st, err := c.state()
	if err != nil {
		log.Printf("%s: %v", what, err)
		return nil, syscall.EIO
	}
	p := st.port(id)
	if p == nil {
		return nil, syscall.ENOENT
	}
	return p, 0
}

func (c *cfs) portDir(id uint16) *dir {
	return &dir{c: c, entries: static(
		c.portAttr(id, "addr_trtype", func(p *daemonPort) string {
			if p.Transport == "" {
				return "rdma"
			}
			return p.Transport
		}),
		c.portAttr(id, "addr_adrfam", func(p *daemonPort) string {
			if a, err := netip.ParseAddr(p.Address); err == nil && a.Is6() && !a.Is4In6() {
				return "ipv6"
			}
			return "ipv4"
		}),
		c.portAttr(id, "addr_traddr", func(p *daemonPort) string { return p.Address }),
		c.portAttr(id, "addr_trsvcid", func(p *daemonPort) string { return strconv.Itoa(int(p.Port)) }),
		entry{"subsystems", c.portSubsystemsDir(id), syscall.S_IFDIR},
		entry{"ana_groups", c.anaGroupsDir(id), syscall.S_IFDIR},
	)}
}

// portSubsystemsDir is ports/P/subsystems/: a link to each subsystem the
// daemon serves on port P.
func (c *cfs) portSubsystemsDir(id uint16) *dir {
	return &dir{c: c, entries: c.fromState(fmt.Sprintf("ports/%d/subsystems", id), func(st *daemonState) ([]entry, syscall.Errno) {
		var es []entry
		for _, s := range st.Subsystems {
			if s.serves(id) {
				es = append(es, entry{s.NQN, &link{target: "../../../subsystems/" + s.NQN}, syscall.S_IFLNK})
			}
		}
		return es, 0
	})}
}

// anaGroupsDir is ports/P/ana_groups/: group 1, which nvmet always has,
// and the groups made here. As in nvmet, a group made is inaccessible
// until its ana_state is written, and one removed becomes inaccessible
// again.
func (c *cfs) anaGroupsDir(id uint16) *dir {
	return &dir{c: c,
		entries: c.fromState(fmt.Sprintf("ports/%d/ana_groups", id), func(st *daemonState) ([]entry, syscall.Errno) {
			if st.port(id) == nil {
				return nil, syscall.ENOENT
			}
			groups := []uint32{1}
			for g := range c.anaGroups[id] {
				groups = append(groups, g)
			}
			slices.Sort(groups)
			es := make([]entry, len(groups))
			for i, g := range groups {
				es[i] = entry{strconv.Itoa(int(g)), c.anaGroupDir(id, g), syscall.S_IFDIR}
			}
			return es, 0
		}),
		mkdir: func(name string) syscall.Errno {
			g, ok := parseID(name, 2, nvme.MaxANAGroups)
			if !ok {
				log.Printf("ports/%d/ana_groups/%s: not a group nvmet makes (2 to %d)", id, name, nvme.MaxANAGroups)
				return syscall.EINVAL
			}
			if errno := c.setANA(id, uint32(g), "inaccessible"); errno != 0 {
				return errno
			}
			if c.anaGroups[id] == nil {
				c.anaGroups[id] = map[uint32]bool{}
			}
			c.anaGroups[id][uint32(g)] = true
			return 0
		},
		rmdir: func(name string) syscall.Errno {
			g, ok := parseID(name, 1, nvme.MaxANAGroups)
			switch {
			case !ok:
				return syscall.ENOENT
			case g == 1:
				return syscall.EPERM // nvmet's default group stays
			}
			if errno := c.setANA(id, uint32(g), "inaccessible"); errno != 0 {
				return errno
			}
			delete(c.anaGroups[id], uint32(g))
			return 0
		},
	}
}

// setANA gives group g on port id the state, in nvmet's spelling.
func (c *cfs) setANA(id uint16, g uint32, state string) syscall.Errno {
	d, ok := anaStates[state]
	if !ok {
		return syscall.EINVAL
	}
	if err := c.api.call("set_ana_state", map[string]any{"port": id, "group": g, "state": d}, nil); err != nil {
		return refused(fmt.Sprintf("ports/%d/ana_groups/%d/ana_state", id, g), err)
	}
	log.Printf("ports/%d/ana_groups/%d: %s", id, g, state)
	return 0
}

func (c *cfs) anaGroupDir(id uint16, g uint32) *dir {
	what := fmt.Sprintf("ports/%d/ana_groups/%d/ana_state", id, g)
	return &dir{c: c, entries: static(entry{"ana_state", &file{c: c,
		what: what,
		show: func() (string, syscall.Errno) {
			p, errno := c.portNow(what, id)
			if errno != 0 {
				return "", errno
			}
			if s, ok := p.ANA[strconv.Itoa(int(g))]; ok {
				return nvmetANAState(s), 0
			}
			return "optimized", 0
		},
		store: func(v string) syscall.Errno { return c.setANA(id, g, v) },
	}, syscall.S_IFREG})}
}
