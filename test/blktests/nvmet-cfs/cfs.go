package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/nvmeof-tgt/nvmeof-tgt/dhchap"
)

// host is what nvmet keeps of a host under hosts/: its DH-HMAC-CHAP
// settings. An empty hash or DH group was never written; configfs then
// shows nvmet's defaults and the daemon applies its own policy.
type host struct {
	key, ctrlKey  string
	hash, dhgroup string // configfs spelling: hmac(sha384), ffdhe2048
}

var attrNames = []string{"dhchap_key", "dhchap_ctrl_key", "dhchap_hash", "dhchap_dhgroup"}

// show is attribute name's value as configfs shows it.
func (h host) show(name string) string {
	switch name {
	case "dhchap_key":
		return h.key
	case "dhchap_ctrl_key":
		return h.ctrlKey
	case "dhchap_hash":
		return orDefault(h.hash, "hmac(sha256)")
	default:
		return orDefault(h.dhgroup, "null")
	}
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// store returns h with attribute name set to v, or false if nvmet would
// refuse v.
func (h host) store(name, v string) (host, bool) {
	switch name {
	case "dhchap_key":
		h.key = v
	case "dhchap_ctrl_key":
		h.ctrlKey = v
	case "dhchap_hash":
		if !slices.ContainsFunc(dhchap.HashNames(), func(n string) bool { return v == "hmac("+n+")" }) {
			return h, false
		}
		h.hash = v
	default:
		if !slices.Contains(dhchap.GroupNames(), v) {
			return h, false
		}
		h.dhgroup = v
	}
	return h, true
}

// hashName is the daemon's name of a hash in configfs spelling:
// hmac(sha384) is sha384.
func hashName(v string) string {
	return strings.TrimSuffix(strings.TrimPrefix(v, "hmac("), ")")
}

// setArgs is the `ctl set host` that gives the daemon all of h.
func (h host) setArgs(subsys, nqn string) []string {
	args := []string{"set", "host", subsys, nqn}
	if h.key != "" {
		args = append(args, "-dhchap-key", h.key)
	}
	if h.ctrlKey != "" {
		args = append(args, "-dhchap-ctrl-key", h.ctrlKey)
	}
	if h.hash != "" {
		args = append(args, "-dhchap-hashes", hashName(h.hash))
	}
	if h.dhgroup != "" {
		args = append(args, "-dhchap-dhgroups", h.dhgroup)
	}
	return args
}

// cfs is the file system's state. mu orders every operation, so a write
// reaches the daemon whole before the next starts.
type cfs struct {
	tgt string     // the nvmeof-tgt command, for the hosts' changes
	api *apiClient // the rest

	mu         sync.Mutex
	hosts      map[string]*host
	subsystems map[string]map[uint32]*namespace // by NQN, NSID
	anaGroups  map[uint16]map[uint32]bool       // made under ports/P/ana_groups
}

// ctl runs `nvmeof-tgt ctl ARGS`; the error carries ctl's message.
func (c *cfs) ctl(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, c.tgt, append([]string{"ctl"}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		// The first four words name the call; the keys stay out of the log.
		return nil, fmt.Errorf("ctl %s: %v: %s", strings.Join(args[:min(len(args), 4)], " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// subsystemsOf lists the subsystems whose allow-list has host nqn.
func (c *cfs) subsystemsOf(nqn string) ([]string, error) {
	out, err := c.ctl("list", "-json")
	if err != nil {
		return nil, err
	}
	var st struct {
		Subsystems []struct {
			NQN   string   `json:"nqn"`
			Hosts []string `json:"hosts"`
		} `json:"subsystems"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, fmt.Errorf("ctl list -json: %v", err)
	}
	var subs []string
	for _, s := range st.Subsystems {
		if slices.Contains(s.Hosts, nqn) {
			subs = append(subs, s.NQN)
		}
	}
	return subs, nil
}

// apply gives the daemon host nqn's new settings on every subsystem that
// allows it; if one refuses, those already changed go back to old.
func (c *cfs) apply(nqn string, old, new host) error {
	subs, err := c.subsystemsOf(nqn)
	if err != nil {
		return err
	}
	for i, s := range subs {
		if _, err := c.ctl(new.setArgs(s, nqn)...); err != nil {
			for _, done := range subs[:i] {
				if _, err := c.ctl(old.setArgs(done, nqn)...); err != nil {
					log.Printf("%s keeps the refused settings of %s: %v", done, nqn, err)
				}
			}
			return err
		}
	}
	log.Printf("host %s set on %d subsystem(s) %v", nqn, len(subs), subs)
	return nil
}

var dirAttr = fs.StableAttr{Mode: syscall.S_IFDIR}

// root is the mount's top: hosts/, ports/ (ports.go), subsystems/
// (subsystems.go).
type root struct {
	fs.Inode
	c *cfs
}

func (r *root) OnAdd(ctx context.Context) {
	r.AddChild("hosts", r.NewPersistentInode(ctx, &hostsDir{c: r.c}, dirAttr), false)
	r.AddChild("ports", r.NewPersistentInode(ctx, r.c.portsDir(), dirAttr), false)
	r.AddChild("subsystems", r.NewPersistentInode(ctx, r.c.subsystemsDir(), dirAttr), false)
}

type hostsDir struct {
	fs.Inode
	c *cfs
}

func (d *hostsDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	if d.c.hosts[name] != nil {
		return nil, syscall.EEXIST
	}
	h := &host{}
	d.c.hosts[name] = h
	dir := d.NewPersistentInode(ctx, &fs.Inode{}, dirAttr)
	for _, a := range attrNames {
		dir.AddChild(a, dir.NewPersistentInode(ctx, d.c.hostAttr(name, h, a), fs.StableAttr{Mode: syscall.S_IFREG}), false)
	}
	out.Mode = syscall.S_IFDIR | 0o755
	return dir, 0
}

// Rmdir forgets the host; the daemon keeps its settings until its
// subsystem goes, as nvmet's subsystems keep their allowed hosts.
func (d *hostsDir) Rmdir(ctx context.Context, name string) syscall.Errno {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	if d.c.hosts[name] == nil {
		return syscall.ENOENT
	}
	delete(d.c.hosts, name)
	return 0
}

// hostAttr is attribute name of host h, whose NQN is nqn: a write
// applies the host's new settings on the daemon before the shim keeps
// them.
func (c *cfs) hostAttr(nqn string, h *host, name string) *file {
	return &file{c: c, what: nqn + "/" + name,
		show: func() (string, syscall.Errno) { return h.show(name), 0 },
		store: func(v string) syscall.Errno {
			if c.hosts[nqn] != h {
				return syscall.ENOENT // the host was removed
			}
			changed, ok := h.store(name, v)
			if !ok {
				log.Printf("%s/%s: %q is not a value nvmet takes", nqn, name, v)
				return syscall.EINVAL
			}
			if err := c.apply(nqn, *h, changed); err != nil {
				return refused(nqn+"/"+name, err)
			}
			*h = changed
			return 0
		},
	}
}

// mount serves c at dir until dir is unmounted.
func mount(dir string, c *cfs) (*fuse.Server, error) {
	if c.api == nil {
		c.api = &apiClient{sock: socketPath()}
	}
	c.hosts = map[string]*host{}
	c.subsystems = map[string]map[uint32]*namespace{}
	c.anaGroups = map[uint16]map[uint32]bool{}
	zero := time.Duration(0)
	return fs.Mount(dir, &root{c: c}, &fs.Options{
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			FsName: "nvmet-cfs", Name: "nvmet-cfs",
			DirectMountStrict: true,
			AllowOther:        true,
		},
	})
}
