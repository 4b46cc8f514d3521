package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// ValidationError is one problem, at a YAML field path.
type ValidationError struct {
	Path string // e.g. subsystems[1].namespaces[0].backend
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

// Limits the validation enforces.
const (
	MaxInlineDataSize = 128 << 10
	MaxNSID           = nvme.MaxNamespaces // Identify NN: hosts see no namespace above it
	maxNQNLength      = 223

	// A queue pair limit below 2 admits no I/O queue at all. Each queue
	// pair may take up to fabrics.ThreadsPerQueuePair (9) OS threads:
	// 8192 of them keep the daemon under 75000 threads, which the daemon
	// raises the Go runtime's limit to, and which Linux's default
	// threads-max (RAM / 128 KiB) allows from 10 GiB of RAM on.
	maxQueuePairs = 8192
	maxBufferPool = 64 << 30
	maxCPU        = 1 << 12
)

// validator collects problems, and what must be unique across the file.
type validator struct {
	es      Errors
	portIDs map[uint16]bool
	nqns    map[string]bool
	uuids   map[[16]byte]string // configured UUID → path of its first use
	listens map[string]string   // "transport address:port" → the port's path
}

func (v *validator) add(path, format string, args ...any) {
	v.es = append(v.es, ValidationError{path, fmt.Sprintf(format, args...)})
}

// Validate checks c (with defaults applied) and returns Errors listing
// every problem, or nil.
func (c *Config) Validate() error {
	v := &validator{portIDs: map[uint16]bool{}, nqns: map[string]bool{}, uuids: map[[16]byte]string{}}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.add("log.level", "unknown level %q (want debug, info, warn or error)", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		v.add("log.format", "unknown format %q (want text or json)", c.Log.Format)
	}
	if a := c.Metrics.Address; a != "" {
		if _, port, err := net.SplitHostPort(a); err != nil {
			v.add("metrics.address", "%q is not host:port", a)
		} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			v.add("metrics.address", "%q: port %q is not a number from 0 to 65535", a, port)
		}
	}
	if len(c.Ports) == 0 {
		v.add("ports", "at least one port is required")
	}
	for i, p := range c.Ports {
		v.port(fmt.Sprintf("ports[%d]", i), p)
	}
	if n := c.Limits.MaxQueuePairs; n < 2 || n > maxQueuePairs {
		v.add("limits.max_queue_pairs", "%d is out of range 2..%d (an admin and an I/O queue at least)", n, maxQueuePairs)
	}
	if n := c.Limits.UnconnectedPerAddress; n < 1 {
		v.add("limits.unconnected_per_address", "%d is below 1 (a host's admin queue)", n)
	}
	if n := c.Limits.QueuePairsPerHost; n != 0 && n < 2 {
		v.add("limits.queue_pairs_per_host", "%d admits no I/O queue: 2 at least (an admin and an I/O queue), or 0 for no cap", n)
	}
	v.rdma(c.RDMA)
	v.tcp(c.TCP)
	if !filepath.IsAbs(c.Control.Socket) {
		v.add("control.socket", "%q is not an absolute path", c.Control.Socket)
	}
	switch c.IOEngine {
	case "auto", "io_uring", "threads":
	default:
		v.add("io_engine", "unknown engine %q (want auto, io_uring or threads)", c.IOEngine)
	}
	if !filepath.IsAbs(c.StateFile) {
		v.add("state_file", "%q is not an absolute path", c.StateFile)
	}
	v.ceph("ceph", c.Ceph)
	for i, dev := range c.RXE {
		if dev == "" || len(dev) > 15 || strings.ContainsAny(dev, "/ \t") {
			v.add(fmt.Sprintf("rxe[%d]", i), "%q is not a network interface name", dev)
		}
	}
	// No subsystems is valid: the daemon serves discovery and subsystems
	// arrive through reload or the admin socket.
	for i, s := range c.Subsystems {
		v.subsystem(fmt.Sprintf("subsystems[%d]", i), s)
	}
	v.gateway(c)
	if len(v.es) > 0 {
		return v.es
	}
	return nil
}

func (v *validator) port(path string, p Port) {
	switch {
	case p.ID == 0:
		v.add(path+".id", "must be 1 or more")
	case v.portIDs[p.ID]:
		v.add(path+".id", "port %d is defined twice", p.ID)
	}
	v.portIDs[p.ID] = true
	if !slices.Contains(Transports, p.Transport) {
		v.add(path+".transport", "unknown transport %q (want rdma or tcp)", p.Transport)
	}
	v.listensOnce(path, p)
	if _, err := netip.ParseAddr(p.Address); err != nil {
		v.add(path+".address", "%q is not an IPv4 or IPv6 address", p.Address)
	}
	if p.Port == 0 {
		v.add(path+".port", "must be 1 or more")
	}
	if p.InlineDataSize > MaxInlineDataSize || p.InlineDataSize%16 != 0 {
		v.add(path+".inline_data_size", "%d must be a multiple of 16 and at most %d", p.InlineDataSize, MaxInlineDataSize)
	}
	switch {
	case p.TLS == "":
	case !slices.Contains(TLSModes, p.TLS):
		v.add(path+".tls", "unknown mode %q (want %s)", p.TLS, strings.Join(TLSModes, ", "))
	case p.TLS != TLSNone && p.Transport != TransportTCP:
		v.add(path+".tls", "TLS is NVMe/TCP's secure channel: a %s port has none (leave tls out)", p.Transport)
	}
	if p.MaxQueueSize < 2 || p.MaxQueueSize > 1024 {
		v.add(path+".max_queue_size", "%d is out of range 2..1024", p.MaxQueueSize)
	}
	for _, g := range slices.Sorted(maps.Keys(p.ANA)) {
		gp := fmt.Sprintf("%s.ana[%d]", path, g)
		if g < 1 || g > nvme.MaxANAGroups {
			v.add(gp, "ANA group %d is out of range 1..%d", g, nvme.MaxANAGroups)
		}
		if !slices.Contains(ANAStates, p.ANA[g]) {
			v.add(gp, "unknown ANA state %q (want %s)", p.ANA[g], strings.Join(ANAStates, ", "))
		}
	}
	for j, r := range p.Referrals {
		rp := fmt.Sprintf("%s.referrals[%d]", path, j)
		if !slices.Contains(Transports, r.Transport) {
			v.add(rp+".transport", "unknown transport %q (want rdma or tcp)", r.Transport)
		}
		if a, err := netip.ParseAddr(r.Address); err != nil {
			v.add(rp+".address", "%q is not an IPv4 or IPv6 address", r.Address)
		} else if a.String() == p.Address && r.Port == p.Port && r.Transport == p.Transport {
			v.add(rp, "refers to this port itself")
		}
	}
}

// listensOnce refuses a second port on the same transport, address and
// service ID: the second listener could not bind. An RDMA and a TCP port
// may share address and number, as the Linux target's may.
func (v *validator) listensOnce(path string, p Port) {
	key := p.Transport + " " + net.JoinHostPort(p.Address, strconv.Itoa(int(p.Port)))
	if first, ok := v.listens[key]; ok {
		v.add(path, "listens on %s as %s does", key, first)
		return
	}
	if v.listens == nil {
		v.listens = map[string]string{}
	}
	v.listens[key] = path
}

func (v *validator) subsystem(path string, s Subsystem) {
	if msg := checkNQN(s.NQN); msg != "" {
		v.add(path+".nqn", "%s", msg)
	} else if s.NQN == DiscoveryNQN {
		v.add(path+".nqn", "%q is reserved for the discovery subsystem", s.NQN)
	} else if v.nqns[s.NQN] {
		v.add(path+".nqn", "%q is defined twice", s.NQN)
	}
	v.nqns[s.NQN] = true
	if len(s.Serial) > 20 || !printable(s.Serial) {
		v.add(path+".serial", "must be at most 20 printable ASCII characters")
	}
	if len(s.Model) > 40 || !printable(s.Model) {
		v.add(path+".model", "must be at most 40 printable ASCII characters")
	}
	if s.MaxControllers < 1 || s.MaxControllers > nvme.MaxControllerID {
		v.add(path+".max_controllers", "%d is out of range 1..%d", s.MaxControllers, nvme.MaxControllerID)
	}
	if s.MaxIOQueues < 1 || s.MaxIOQueues > nvme.MaxIOQueues {
		v.add(path+".max_io_queues", "%d is out of range 1..%d", s.MaxIOQueues, nvme.MaxIOQueues)
	}
	if lo, hi := s.CntlidRange(); hi > nvme.MaxControllerID || lo > hi {
		v.add(path+".cntlid_min", "controller ID range %d..%d is not within %d..%d", lo, hi,
			nvme.MinControllerID, nvme.MaxControllerID)
	}
	if !s.AllowAnyHost && len(s.Hosts) == 0 {
		v.add(path+".hosts", "no host may connect: set allow_any_host: true or list hosts")
	}
	hosts := map[string]bool{}
	for j, h := range s.Hosts {
		hp := fmt.Sprintf("%s.hosts[%d]", path, j)
		if !h.Plain() {
			v.hostKeys(hp, h)
			v.narrows(hp+".dhchap_hashes", h.DHCHAPHashes, s.DHCHAPHashes, DHCHAPHashes, "dhchap_hashes")
			v.narrows(hp+".dhchap_dhgroups", h.DHCHAPDHGroups, s.DHCHAPDHGroups, DHCHAPDHGroups, "dhchap_dhgroups")
			hp += ".nqn"
		}
		if msg := checkNQN(h.NQN); msg != "" {
			v.add(hp, "%s", msg)
		} else if hosts[h.NQN] {
			v.add(hp, "%q is listed twice", h.NQN)
		}
		hosts[h.NQN] = true
	}
	v.names(path+".dhchap_hashes", s.DHCHAPHashes, DHCHAPHashes)
	v.names(path+".dhchap_dhgroups", s.DHCHAPDHGroups, DHCHAPDHGroups)
	ports := map[uint16]bool{}
	for j, id := range s.Ports {
		pp := fmt.Sprintf("%s.ports[%d]", path, j)
		if !v.portIDs[id] {
			v.add(pp, "no port has id %d", id)
		} else if ports[id] {
			v.add(pp, "port %d is listed twice", id)
		}
		ports[id] = true
	}
	nsids := map[uint32]bool{}
	for j, ns := range s.Namespaces {
		v.namespace(fmt.Sprintf("%s.namespaces[%d]", path, j), ns, nsids)
		v.namespaceHosts(fmt.Sprintf("%s.namespaces[%d].hosts", path, j), ns, s)
	}
}

func (v *validator) namespace(path string, ns Namespace, nsids map[uint32]bool) {
	switch {
	case ns.NSID == 0 || ns.NSID > MaxNSID:
		v.add(path+".nsid", "%d is out of range 1..%d", ns.NSID, uint32(MaxNSID))
	case nsids[ns.NSID]:
		v.add(path+".nsid", "nsid %d is defined twice", ns.NSID)
	}
	nsids[ns.NSID] = true
	ns.QoS.validate(v, path)
	ns.SharedReservations.validate(v, path, ns)
	if ns.Backend != "rbd" {
		for _, f := range []struct {
			key string
			set bool
		}{{"pool", ns.Pool != ""}, {"rados_namespace", ns.RadosNamespace != ""}, {"image", ns.Image != ""},
			{"create", ns.Create}, {"ceph", ns.Ceph != (Ceph{})}} {
			if f.set {
				v.add(path+"."+f.key, "only for the rbd backend")
			}
		}
	}
	switch ns.Backend {
	case "file", "block":
		if ns.Path == "" {
			v.add(path+".path", "required for the %s backend", ns.Backend)
		} else if !filepath.IsAbs(ns.Path) {
			v.add(path+".path", "%q must be an absolute path", ns.Path)
		}
		if ns.Backend == "file" && ns.Size == 0 {
			if _, err := os.Stat(ns.Path); err != nil {
				v.add(path+".size", "required: the file does not exist yet")
			}
		}
	case "nullblk":
		if ns.Size == 0 {
			v.add(path+".size", "required for the nullblk backend")
		}
	case "rbd":
		v.rbd(path, ns)
	case "null", "":
		// YAML reads an unquoted null (and nothing at all) as no value.
		v.add(path+".backend", "unknown backend %q (want file, block, rbd or nullblk; write nullblk, since YAML reads null as no value)", ns.Backend)
	default:
		v.add(path+".backend", "unknown backend %q (want file, block, rbd or nullblk)", ns.Backend)
	}
	switch {
	case ns.BlockSize == 0 && ns.Backend == "block":
	case ns.BlockSize != 512 && ns.BlockSize != 4096:
		v.add(path+".block_size", "%d is not 512 or 4096", ns.BlockSize)
	case ns.Size%Size(ns.BlockSize) != 0:
		v.add(path+".size", "%s is not a multiple of block_size %d", ns.Size, ns.BlockSize)
	}
	if ns.ANAGroup > nvme.MaxANAGroups {
		v.add(path+".ana_group", "%d is out of range 1..%d", ns.ANAGroup, nvme.MaxANAGroups)
	}
	if ns.UUID != "" {
		u, err := NamespaceUUID("", 0, ns.UUID)
		switch first, dup := v.uuids[u]; {
		case err != nil:
			v.add(path+".uuid", "%v", err)
		case dup:
			// Hosts take namespaces with one UUID for paths to one namespace.
			v.add(path+".uuid", "%s is already used by %s", ns.UUID, first)
		default:
			v.uuids[u] = path
		}
	}
}

// rbd checks an rbd namespace: the image's names, and create with size.
func (v *validator) rbd(path string, ns Namespace) {
	if ns.Path != "" {
		v.add(path+".path", "not used by the rbd backend (name the image with pool and image)")
	}
	if ns.Buffered {
		v.add(path+".buffered", "only for the file backend")
	}
	for _, f := range []struct {
		key, val, bad string
		required      bool
	}{{"pool", ns.Pool, "/@", true}, {"image", ns.Image, "/@", true}, {"rados_namespace", ns.RadosNamespace, "/@", false}} {
		switch {
		case f.val == "" && f.required:
			v.add(path+"."+f.key, "required for the rbd backend")
		case len(f.val) > 255 || !printable(f.val) || strings.ContainsAny(f.val, f.bad+" "):
			v.add(path+"."+f.key, "%q must be printable ASCII without spaces, / or @, at most 255 bytes", f.val)
		}
	}
	switch {
	case ns.Create && ns.Size == 0:
		v.add(path+".size", "required with create: true (the size of the image to create)")
	case ns.Create && ns.ReadOnly:
		v.add(path+".create", "a read-only namespace cannot create its image")
	case !ns.Create && ns.Size != 0:
		v.add(path+".size", "only with create: true: an rbd namespace takes its size from the image (rbd resize, then reload)")
	}
	v.ceph(path+".ceph", ns.Ceph)
}

// ceph checks a ceph block (a namespace's, or the top-level one).
func (v *validator) ceph(path string, c Ceph) {
	if c.Conf != "" && !filepath.IsAbs(c.Conf) {
		v.add(path+".conf", "%q must be an absolute path", c.Conf)
	}
	if c.Keyring != "" && !filepath.IsAbs(c.Keyring) {
		v.add(path+".keyring", "%q must be an absolute path", c.Keyring)
	}
	if u := strings.TrimPrefix(c.User, "client."); c.User != "" && (u == "" || !printable(u) || strings.ContainsAny(u, " /")) {
		v.add(path+".user", "%q is not a cephx user name (such as nvmeof, for client.nvmeof)", c.User)
	}
}

// checkNQN returns what is wrong with an NQN, or "".
func checkNQN(nqn string) string {
	switch {
	case nqn == "":
		return "required"
	// Names need not start with "nqn.": the Linux host and target accept
	// any, and test suites such as blktests use plain ones.
	case len(nqn) > maxNQNLength:
		return fmt.Sprintf("%d bytes is longer than %d", len(nqn), maxNQNLength)
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

func (v *validator) rdma(r RDMA) {
	const mib = 1 << 20
	if r.BufferPool < mib || r.BufferPool > maxBufferPool || r.BufferPool%mib != 0 {
		v.add("rdma.buffer_pool", "%d bytes: want a whole number of MiB from 1MiB to 64GiB", int64(r.BufferPool))
	}
	if n := r.ReceiveQueueDepth; n < 64 || n > 1<<16 {
		v.add("rdma.receive_queue_depth", "%d is out of range 64..65536", n)
	}
	for i, cpu := range r.PollerCPUs {
		if cpu < 0 || cpu >= maxCPU {
			v.add(fmt.Sprintf("rdma.poller_cpus[%d]", i), "%d is not a CPU number (0..%d)", cpu, maxCPU-1)
		}
	}
}

// hostKeys checks a host's secrets: the DHHC-1 format, base64, length and
// CRC, key files readable by their owner only.
func (v *validator) hostKeys(path string, h Host) {
	host, ctrl, err := h.Secrets()
	host.Clear()
	ctrl.Clear()
	var fe *fieldError
	switch {
	case errors.As(err, &fe):
		v.add(path+"."+fe.field, "%v", fe.err)
	case err != nil:
		v.add(path, "%v", err)
	case !h.HasKey() && (h.DHCHAPCtrlKey != "" || h.DHCHAPCtrlKeyFile != ""):
		v.add(path+".dhchap_ctrl_key", "a controller key needs a host key (dhchap_key): the host authenticates first")
	}
	k, _, err := h.TLSPSK()
	k.Clear()
	if errors.As(err, &fe) {
		v.add(path+"."+fe.field, "%v", fe.err)
	} else if err != nil {
		v.add(path, "%v", err)
	}
}

// narrows checks a host's hash or group list: known names, once each, and
// only ones its subsystem's list (when it has one) accepts too.
func (v *validator) narrows(path string, list, subsystem, known []string, field string) {
	v.names(path, list, known)
	if len(subsystem) == 0 {
		return
	}
	for i, n := range list {
		if slices.Contains(known, n) && !slices.Contains(subsystem, n) {
			v.add(fmt.Sprintf("%s[%d]", path, i), "%q is not in the subsystem's %s (%s)", n, field, strings.Join(subsystem, ", "))
		}
	}
}

// names checks that every entry of list is one of known, once.
func (v *validator) names(path string, list, known []string) {
	seen := map[string]bool{}
	for i, n := range list {
		switch {
		case !slices.Contains(known, n):
			v.add(fmt.Sprintf("%s[%d]", path, i), "unknown %q (want %s)", n, strings.Join(known, ", "))
		case seen[n]:
			v.add(fmt.Sprintf("%s[%d]", path, i), "%q is listed twice", n)
		}
		seen[n] = true
	}
}
