package main

import (
	"crypto/rand"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// namespace is what nvmet keeps of subsystems/X/namespaces/N. A disabled
// one is the shim's alone; enabling it adds it to the daemon
// (add_namespace) and disabling removes it (remove_namespace), which is
// what a host sees of nvmet's enable.
type namespace struct {
	path  string // device_path: a block device or a file
	uuid  string
	nguid string // the daemon takes none: only zeros
	grpid uint32
	resv  bool // resv_enable: the daemon's namespace key reservations
	on    bool // enable

	// What the daemon had when the shim last saw the namespace enabled:
	// enabling it again adds it back the same, until device_path is
	// written.
	backend   string
	size      uint64 // nullblk
	blockSize uint32
	readOnly  bool
}

const zeroNGUID = "00000000-0000-0000-0000-000000000000"

// newNamespace is a namespace as nvmet makes one on mkdir: disabled, with
// a random UUID, in ANA group 1.
func newNamespace() *namespace {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return &namespace{uuid: formatUUID(b), nguid: zeroNGUID, grpid: 1}
}

func formatUUID(b []byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// validUUID is whether v is a UUID in its 36-character form.
func validUUID(v string) bool {
	if len(v) != 36 {
		return false
	}
	for i, r := range v {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
				return false
			}
		}
	}
	return true
}

// parseBool reads a boolean as the kernel's kstrtobool does.
func parseBool(v string) (bool, bool) {
	if v == "" {
		return false, false
	}
	switch strings.ToLower(v) {
	case "1", "y", "yes", "on", "true":
		return true, true
	case "0", "n", "no", "off", "false":
		return false, true
	}
	switch v[0] {
	case '1', 'y', 'Y':
		return true, true
	case '0', 'n', 'N':
		return false, true
	}
	return false, false
}

// addParams is the add_namespace call that enables ns as nsid of subsys.
type addParams struct {
	NQN          string `json:"nqn"`
	NSID         uint32 `json:"nsid"`
	Backend      string `json:"backend"`
	Path         string `json:"path,omitempty"`
	Size         uint64 `json:"size,omitempty"`
	BlockSize    uint32 `json:"block_size,omitempty"`
	ReadOnly     bool   `json:"read_only,omitempty"`
	UUID         string `json:"uuid,omitempty"`
	ANAGroup     uint32 `json:"ana_group,omitempty"`
	Reservations bool   `json:"reservations,omitempty"`
}

func (ns *namespace) addParams(subsys string, nsid uint32) (addParams, error) {
	p := addParams{NQN: subsys, NSID: nsid, Backend: ns.backend, Path: ns.path,
		BlockSize: ns.blockSize, ReadOnly: ns.readOnly, UUID: ns.uuid, Reservations: ns.resv}
	if p.Backend == "" {
		if ns.path == "" {
			return p, fmt.Errorf("no device_path")
		}
		fi, err := os.Stat(ns.path)
		switch {
		case err != nil:
			return p, err
		case fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0:
			p.Backend = "block"
		case fi.Mode().IsRegular():
			p.Backend = "file"
		default:
			return p, fmt.Errorf("%s is neither a block device nor a file", ns.path)
		}
	}
	if p.Backend == "nullblk" {
		p.Size = ns.size
	}
	if ns.grpid != 1 {
		p.ANAGroup = ns.grpid
	}
	return p, nil
}

// sync brings the shim's namespaces of subsystem nqn in line with the
// daemon's: it adopts those the daemon has (setup's, or added with ctl)
// and counts as disabled those it no longer has. It returns false, and
// forgets the subsystem, when the daemon has no subsystem nqn.
func (c *cfs) sync(st *daemonState, nqn string) bool {
	ds := st.subsystem(nqn)
	if ds == nil {
		delete(c.subsystems, nqn)
		return false
	}
	nss := c.subsystems[nqn]
	if nss == nil {
		nss = map[uint32]*namespace{}
		c.subsystems[nqn] = nss
	}
	for _, ns := range nss {
		ns.on = false
	}
	for _, d := range ds.Namespaces {
		ns := nss[d.NSID]
		if ns == nil {
			ns = &namespace{nguid: zeroNGUID}
			nss[d.NSID] = ns
		}
		ns.path, ns.uuid, ns.grpid, ns.on = d.Path, d.UUID, max(d.ANAGroup, 1), true
		ns.backend, ns.size, ns.blockSize, ns.readOnly = d.Backend, d.SizeBytes, d.BlockSize, d.ReadOnly
	}
	return true
}

// subsystemsDir is subsystems/: the daemon's subsystems. They are made
// and removed with nvme-target-control setup and cleanup.
func (c *cfs) subsystemsDir() *dir {
	return &dir{c: c, entries: c.fromState("subsystems", func(st *daemonState) ([]entry, syscall.Errno) {
		var es []entry
		for _, s := range st.Subsystems {
			c.sync(st, s.NQN)
			es = append(es, entry{s.NQN, c.subsystemDir(s.NQN), syscall.S_IFDIR})
		}
		return es, 0
	})}
}

func (c *cfs) subsystemDir(nqn string) *dir {
	return &dir{c: c, entries: static(entry{"namespaces", c.namespacesDir(nqn), syscall.S_IFDIR})}
}

// namespacesDir is subsystems/X/namespaces/: mkdir N makes namespace N
// disabled, rmdir N disables and forgets it.
func (c *cfs) namespacesDir(nqn string) *dir {
	return &dir{c: c,
		entries: func() ([]entry, syscall.Errno) {
			nss, ok := c.subsystems[nqn]
			if !ok {
				return nil, syscall.ENOENT
			}
			ids := make([]uint32, 0, len(nss))
			for id := range nss {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			es := make([]entry, len(ids))
			for i, id := range ids {
				es[i] = entry{strconv.FormatUint(uint64(id), 10), c.namespaceDir(nqn, id), syscall.S_IFDIR}
			}
			return es, 0
		},
		mkdir: func(name string) syscall.Errno {
			nss, ok := c.subsystems[nqn]
			if !ok {
				return syscall.ENOENT
			}
			id, ok := parseID(name, 1, 0xfffffffe)
			if !ok {
				log.Printf("subsystems/%s/namespaces/%s: not an NSID nvmet takes (1 to 4294967294)", nqn, name)
				return syscall.EINVAL
			}
			if nss[uint32(id)] != nil {
				return syscall.EEXIST
			}
			nss[uint32(id)] = newNamespace()
			return 0
		},
		rmdir: func(name string) syscall.Errno {
			id, _ := parseID(name, 1, 0xfffffffe)
			ns := c.subsystems[nqn][uint32(id)]
			if ns == nil {
				return syscall.ENOENT
			}
			if errno := c.disable(nqn, uint32(id), ns); errno != 0 {
				return errno
			}
			delete(c.subsystems[nqn], uint32(id))
			return 0
		},
	}
}

// namespace is namespace nsid of nqn, if the shim still has it.
func (c *cfs) namespace(nqn string, nsid uint32) (*namespace, syscall.Errno) {
	ns := c.subsystems[nqn][nsid]
	if ns == nil {
		return nil, syscall.ENOENT
	}
	return ns, 0
}

func (c *cfs) disable(nqn string, nsid uint32, ns *namespace) syscall.Errno {
	if !ns.on {
		return 0
	}
	if err := c.api.call("remove_namespace", map[string]any{"nqn": nqn, "nsid": nsid}, nil); err != nil {
		return refused(fmt.Sprintf("subsystems/%s/namespaces/%d/enable", nqn, nsid), err)
	}
	ns.on = false
	log.Printf("subsystems/%s/namespaces/%d disabled", nqn, nsid)
	return 0
}

func (c *cfs) enable(nqn string, nsid uint32, ns *namespace) syscall.Errno {
	if ns.on {
		return 0
	}
	what := fmt.Sprintf("subsystems/%s/namespaces/%d/enable", nqn, nsid)
	p, err := ns.addParams(nqn, nsid)
	if err == nil {
		err = c.api.call("add_namespace", p, nil)
	}
	if err != nil {
		return refused(what, err)
	}
	ns.on = true
	log.Printf("subsystems/%s/namespaces/%d enabled: %s backend %s uuid %s group %d reservations %v",
		nqn, nsid, p.Path, p.Backend, p.UUID, ns.grpid, p.Reservations)
	return 0
}

// namespaceDir is subsystems/X/namespaces/N: nvmet's attributes. Those
// that say which device it is can change only while it is disabled
// (EBUSY, as nvmet); ana_grpid moves an enabled one at once.
// namespaceAttr is the attribute name of namespace nsid of subsystem nqn:
// show and store run on the namespace, which may have gone meanwhile
// (ENOENT).
func (c *cfs) namespaceAttr(nqn string, nsid uint32, name string, show func(ns *namespace) string, store func(ns *namespace, v string) syscall.Errno) entry {
	return entry{name, &file{c: c,
		what: fmt.Sprintf("subsystems/%s/namespaces/%d/%s", nqn, nsid, name),
		show: func() (string, syscall.Errno) {
			ns, errno := c.namespace(nqn, nsid)
			if errno != 0 {
				return "", errno
			}
			return show(ns), 0
		},
		store: func(v string) syscall.Errno {
			ns, errno := c.namespace(nqn, nsid)
			if errno != 0 {
				return errno
			}
			return store(ns, v)
		},
	}, syscall.S_IFREG}
}

// whileDisabled wraps a store nvmet refuses on an enabled namespace.
func whileDisabled(store func(ns *namespace, v string) syscall.Errno) func(ns *namespace, v string) syscall.Errno {
	return func(ns *namespace, v string) syscall.Errno {
		if ns.on {
			return syscall.EBUSY
		}
		return store(ns, v)
	}
}

// boolString is b as configfs shows a boolean attribute.
func boolString(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (c *cfs) namespaceDir(nqn string, nsid uint32) *dir {
	attr := func(name string, show func(ns *namespace) string, store func(ns *namespace, v string) syscall.Errno) entry {
		return c.namespaceAttr(nqn, nsid, name, show, store)
	}
	return &dir{c: c, entries: static(
		attr("device_path", func(ns *namespace) string { return ns.path }, whileDisabled(func(ns *namespace, v string) syscall.Errno {
			if v == "" {
				return syscall.EINVAL
			}
			ns.path, ns.backend = v, ""
			ns.size, ns.blockSize, ns.readOnly = 0, 0, false
			return 0
		})),
		attr("device_uuid", func(ns *namespace) string { return ns.uuid }, whileDisabled(func(ns *namespace, v string) syscall.Errno {
			if !validUUID(v) {
				return syscall.EINVAL
			}
			ns.uuid = strings.ToLower(v)
			return 0
		})),
		attr("device_nguid", func(ns *namespace) string { return ns.nguid }, whileDisabled(func(ns *namespace, v string) syscall.Errno {
			if !validUUID(v) {
				return syscall.EINVAL
			}
			if v != zeroNGUID {
				log.Printf("subsystems/%s/namespaces/%d/device_nguid: the daemon sets no NGUID; only %s is kept", nqn, nsid, zeroNGUID)
				return syscall.EINVAL
			}
			ns.nguid = v
			return 0
		})),
		attr("ana_grpid", func(ns *namespace) string { return strconv.FormatUint(uint64(ns.grpid), 10) }, func(ns *namespace, v string) syscall.Errno {
			g, ok := parseID(v, 1, nvme.MaxANAGroups)
			if !ok {
				return syscall.EINVAL
			}
			if ns.on {
				if err := c.api.call("set_namespace", map[string]any{"nqn": nqn, "nsid": nsid, "ana_group": g}, nil); err != nil {
					return refused(fmt.Sprintf("subsystems/%s/namespaces/%d/ana_grpid", nqn, nsid), err)
				}
			}
			ns.grpid = uint32(g)
			return 0
		}),
		attr("resv_enable", func(ns *namespace) string { return boolString(ns.resv) }, whileDisabled(func(ns *namespace, v string) syscall.Errno {
			b, ok := parseBool(v)
			if !ok {
				return syscall.EINVAL
			}
			ns.resv = b
			return 0
		})),
		attr("enable", func(ns *namespace) string { return boolString(ns.on) }, func(ns *namespace, v string) syscall.Errno {
			b, ok := parseBool(v)
			switch {
			case !ok:
				return syscall.EINVAL
			case b:
				return c.enable(nqn, nsid, ns)
			default:
				return c.disable(nqn, nsid, ns)
			}
		}),
	)}
}
