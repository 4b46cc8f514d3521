package config

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// ValidationError is one problem, at a YAML field path.
type ValidationError struct {
	Path string
	Msg  string
}

func (e ValidationError) Error() string { return e.Path + ": " + e.Msg }

// Errors is every problem found in a configuration, one per line.
type Errors []ValidationError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// DiscoveryNQN is reserved for the discovery subsystem.
const DiscoveryNQN = "nqn.2014-08.org.nvmexpress.discovery"

// Validate checks c (with defaults applied) and returns Errors, or nil.
func (c *Config) Validate() error {
	var es Errors
	add := func(path, format string, args ...any) {
		es = append(es, ValidationError{path, fmt.Sprintf(format, args...)})
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		add("log.level", "unknown level %q (want debug, info, warn or error)", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		add("log.format", "unknown format %q (want text or json)", c.Log.Format)
	}
	if a := c.Metrics.Address; a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			add("metrics.address", "%q is not host:port", a)
		}
	}
	if len(c.Ports) == 0 {
		add("ports", "at least one port is required")
	}
	portIDs := map[uint16]bool{}
	for i, p := range c.Ports {
		path := fmt.Sprintf("ports[%d]", i)
		switch {
		case p.ID == 0:
			add(path+".id", "must be 1 or more")
		case portIDs[p.ID]:
			add(path+".id", "port %d is defined twice", p.ID)
		}
		portIDs[p.ID] = true
		if p.Transport != "rdma" {
			add(path+".transport", "unknown transport %q (want rdma)", p.Transport)
		}
		if _, err := netip.ParseAddr(p.Address); err != nil {
			add(path+".address", "%q is not an IPv4 or IPv6 address", p.Address)
		}
		if p.InlineDataSize > 128<<10 || p.InlineDataSize%16 != 0 {
			add(path+".inline_data_size", "%d must be a multiple of 16 and at most 131072", p.InlineDataSize)
		}
		if p.MaxQueueSize < 2 || p.MaxQueueSize > 1024 {
			add(path+".max_queue_size", "%d is out of range 2..1024", p.MaxQueueSize)
		}
	}
	if len(c.Subsystems) == 0 {
		add("subsystems", "at least one subsystem is required")
	}
	nqns := map[string]bool{}
	for i, s := range c.Subsystems {
		path := fmt.Sprintf("subsystems[%d]", i)
		if msg := checkNQN(s.NQN); msg != "" {
			add(path+".nqn", "%s", msg)
		} else if s.NQN == DiscoveryNQN {
			add(path+".nqn", "%q is reserved for the discovery subsystem", s.NQN)
		} else if nqns[s.NQN] {
			add(path+".nqn", "%q is defined twice", s.NQN)
		}
		nqns[s.NQN] = true
		if len(s.Serial) > 20 || !printable(s.Serial) {
			add(path+".serial", "must be at most 20 printable ASCII characters")
		}
		if len(s.Model) > 40 || !printable(s.Model) {
			add(path+".model", "must be at most 40 printable ASCII characters")
		}
		if !s.AllowAnyHost && len(s.Hosts) == 0 {
			add(path+".hosts", "no host may connect: set allow_any_host: true or list hosts")
		}
		hosts := map[string]bool{}
		for j, h := range s.Hosts {
			hp := fmt.Sprintf("%s.hosts[%d]", path, j)
			if msg := checkNQN(h); msg != "" {
				add(hp, "%s", msg)
			} else if hosts[h] {
				add(hp, "%q is listed twice", h)
			}
			hosts[h] = true
		}
		for j, id := range s.Ports {
			if !portIDs[id] {
				add(fmt.Sprintf("%s.ports[%d]", path, j), "no port has id %d", id)
			}
		}
		nsids := map[uint32]bool{}
		for j, ns := range s.Namespaces {
			validateNamespace(fmt.Sprintf("%s.namespaces[%d]", path, j), ns, nsids, add)
		}
	}
	if len(es) > 0 {
		return es
	}
	return nil
}

func validateNamespace(path string, ns Namespace, nsids map[uint32]bool, add func(string, string, ...any)) {
	switch {
	case ns.NSID == 0 || ns.NSID >= 0xfffffffe:
		add(path+".nsid", "%d is out of range 1..4294967293", ns.NSID)
	case nsids[ns.NSID]:
		add(path+".nsid", "nsid %d is defined twice", ns.NSID)
	}
	nsids[ns.NSID] = true
	switch ns.Backend {
	case "file", "block":
		if ns.Path == "" {
			add(path+".path", "required for the %s backend", ns.Backend)
		} else if !filepath.IsAbs(ns.Path) {
			add(path+".path", "%q must be an absolute path", ns.Path)
		}
		if ns.Backend == "file" && ns.Size == 0 {
			if _, err := os.Stat(ns.Path); err != nil {
				add(path+".size", "required: the file does not exist yet")
			}
		}
	case "nullblk":
		if ns.Size == 0 {
			add(path+".size", "required for the nullblk backend")
		}
	case "null", "":
		add(path+".backend", "unknown backend %q (want file, block or nullblk; write nullblk, since YAML reads null as no value)", ns.Backend)
	default:
		add(path+".backend", "unknown backend %q (want file, block or nullblk)", ns.Backend)
	}
	switch {
	case ns.BlockSize == 0 && ns.Backend == "block":
	case ns.BlockSize != 512 && ns.BlockSize != 4096:
		add(path+".block_size", "%d is not 512 or 4096", ns.BlockSize)
	case ns.Size%Size(ns.BlockSize) != 0:
		add(path+".size", "%s is not a multiple of block_size %d", ns.Size, ns.BlockSize)
	}
	if ns.UUID != "" {
		if _, err := ParseUUID(ns.UUID); err != nil {
			add(path+".uuid", "%v", err)
		}
	}
}

// checkNQN returns what is wrong with an NQN, or "".
func checkNQN(nqn string) string {
	switch {
	case nqn == "":
		return "required"
	case !strings.HasPrefix(nqn, "nqn."):
		return fmt.Sprintf("%q must start with \"nqn.\"", nqn)
	case len(nqn) > 223:
		return fmt.Sprintf("%d bytes is longer than 223", len(nqn))
	case !printable(nqn) || strings.ContainsRune(nqn, ' '):
		return fmt.Sprintf("%q must be printable ASCII without spaces", nqn)
	}
	return ""
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
