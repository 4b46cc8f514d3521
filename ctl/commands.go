package ctl

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// verbs is every ctl command, in the order ctl's usage lists them.
var verbs = []ctlVerb{
	{name: "list", about: "Print the running state: ports, subsystems, namespaces, hosts and connected controllers.",
		flags: listFlags},
	{name: "add port", about: "Listen on one more address, over RDMA (the default) or NVMe/TCP.", flags: addPortFlags},
	{name: "add subsystem", args: []string{"NQN"}, about: "Add an NVM subsystem, without namespaces.", flags: addSubsystemFlags},
	{name: "add namespace", args: []string{"NQN"}, about: "Add a namespace to subsystem NQN; connected hosts see it appear.",
		flags: addNamespaceFlags},
	{name: "add host", args: []string{"NQN", "HOSTNQN"}, about: "Allow host HOSTNQN into subsystem NQN, with its DH-HMAC-CHAP keys if given.", flags: hostKeyFlags("add_host")},
	{name: "set host", args: []string{"NQN", "HOSTNQN"}, about: "Replace the DH-HMAC-CHAP keys and hash and group lists of host HOSTNQN (none given: no authentication); connected hosts stay.",
		flags: hostKeyFlags("set_host")},
	{name: "set subsystem", args: []string{"NQN"}, about: "Change who may connect to subsystem NQN, or its controller ID range.", flags: setSubsystemFlags},
	{name: "set namespace", args: []string{"NQN", "NSID"}, about: "Resize a namespace, move it to another ANA group, or change its QoS limits, in place: hosts keep it.",
		flags: setNamespaceFlags},
	{name: "set ana", args: []string{"PORT", "GROUP", "STATE"},
		about: "Set the ANA state of group GROUP on port PORT: optimized, non_optimized, inaccessible, persistent_loss or change.\n" +
			"Hosts connected through the port keep their connections and get an ANA change event.",
		flags: setANAFlags},
	{name: "gateway release", args: []string{"GROUP"},
		about: "Planned handover: if this daemon owns gateway group GROUP, make it inaccessible here and release its lease;\n" +
			"a peer gateway, notified through the lease object, takes it at once, without fencing.",
		flags: gatewayReleaseFlags},
	{name: "remove port", args: []string{"ID"}, about: "Stop listening on port ID; hosts connected through it are disconnected.",
		flags: removePortFlags},
	{name: "remove subsystem", args: []string{"NQN"}, about: "Remove subsystem NQN; its hosts are disconnected.",
		flags: func(*flag.FlagSet) func([]string) (*Command, error) {
			return func(pos []string) (*Command, error) {
				return ctlEdit("remove_subsystem", api.SubsystemRef{NQN: pos[0]})
			}
		}},
	{name: "remove namespace", args: []string{"NQN", "NSID"}, about: "Remove a namespace once its commands in flight are done.",
		flags: func(*flag.FlagSet) func([]string) (*Command, error) {
			return func(pos []string) (*Command, error) {
				nsid, err := parseNSID(pos[1])
				if err != nil {
					return nil, err
				}
				return ctlEdit("remove_namespace", api.NamespaceRef{NQN: pos[0], NSID: nsid})
			}
		}},
	{name: "add namespace-host", args: []string{"NQN", "NSID", "HOSTNQN"}, about: "Show namespace NSID, limited to some hosts, to HOSTNQN too; its block device appears there.",
		flags: namespaceHostFlags("add_namespace_host")},
	{name: "remove namespace-host", args: []string{"NQN", "NSID", "HOSTNQN"}, about: "Hide namespace NSID from HOSTNQN; without its last host, no host sees it.",
		flags: namespaceHostFlags("remove_namespace_host")},
	{name: "remove host", args: []string{"NQN", "HOSTNQN"}, about: "Take HOSTNQN off subsystem NQN's allow-list; its controllers go.",
		flags: hostFlags("remove_host")},
	{name: "save", args: []string{"FILE|-"}, about: "Write the running configuration as YAML to FILE (replaced atomically) or to stdout (-).",
		flags: func(*flag.FlagSet) func([]string) (*Command, error) {
			return func(pos []string) (*Command, error) {
				return &Command{Method: "save_config", Params: api.SaveParams{}, show: showSave(pos[0])}, nil
			}
		}},
	{name: "reload", about: "Re-read the daemon's configuration file, as SIGHUP does.",
		flags: func(*flag.FlagSet) func([]string) (*Command, error) {
			return func([]string) (*Command, error) { return &Command{Method: "reload", show: showReload}, nil }
		}},
}

func listFlags(fs *flag.FlagSet) func([]string) (*Command, error) {
	asJSON := fs.Bool("json", false, "print the state as JSON (get_state's result), for scripts")
	return func([]string) (*Command, error) {
		show := ShowState
		if *asJSON {
			show = showStateJSON
		}
		return &Command{Method: "get_state", show: show}, nil
	}
}

func addPortFlags(fs *flag.FlagSet) func([]string) (*Command, error) {
	var p api.PortParams
	var svc, depth uint16
	var inline uint32
	uintVar(fs, &p.ID, "id", 0, "port `ID`, unique on this target (required)")
	fs.StringVar(&p.Transport, "transport", config.TransportRDMA, "`TRANSPORT` hosts connect with: rdma or tcp")
	fs.StringVar(&p.Address, "address", "", "local IPv4 or IPv6 `ADDRESS` to listen on, of an RDMA netdev for rdma (required)")
	uintVar(fs, &svc, "port", config.DefaultServiceID, "service ID (trsvcid) `PORT` hosts connect to")
	fs.Func("ana", "`GROUP=STATE`: the ANA state of a group on this port (non_optimized, inaccessible, persistent_loss or change; a group left out is optimized) (repeat for more)", func(v string) error {
		g, st, err := parseANA(v)
		if err != nil {
			return err
		}
		if p.ANA == nil {
			p.ANA = map[uint32]string{}
		}
		p.ANA[g] = st
		return nil
	})
	listVar(fs, &p.Referrals, "referral", "`[TRANSPORT://]ADDRESS[:PORT]` another discovery service this port's discovery log lists, e.g. tcp://10.0.0.2:8009 or rdma://[fd00::2]", parseReferral)
	uintVar(fs, &inline, "inline-data-size", config.DefaultInlineDataSize, "`BYTES` of write data a command may carry in its capsule, a multiple of 16")
	uintVar(fs, &depth, "max-queue-size", config.DefaultMaxQueueSize, "most `ENTRIES` of an I/O queue, 2 to 1024")
	return func([]string) (*Command, error) {
		p.Port, p.InlineDataSize, p.MaxQueueSize = &svc, &inline, &depth
		return ctlEdit("add_port", p)
	}
}

func addSubsystemFlags(fs *flag.FlagSet) func([]string) (*Command, error) {
	var p api.SubsystemParams
	fs.StringVar(&p.Serial, "serial", "", "`SERIAL` number hosts see, up to 20 characters (default: derived from the NQN)")
	fs.StringVar(&p.Model, "model", "", "`MODEL` number hosts see, up to 40 characters (default nvmeof-tgt)")
	fs.BoolVar(&p.AllowAnyHost, "allow-any-host", false, "let any host connect, not only those given with -host")
	listVar(fs, &p.Ports, "port", "serve the subsystem on port `ID` only (default: every port)", parseUint16)
	listVar(fs, &p.Hosts, "host", "allow host `HOSTNQN` (keys: ctl add host)", func(s string) (config.Host, error) { return config.HostNQN(s), nil })
	uintVar(fs, &p.CntlidMin, "cntlid-min", 0, "lowest controller `ID` handed out (default 1); another daemon serving the subsystem needs a range apart")
	uintVar(fs, &p.CntlidMax, "cntlid-max", 0, "highest controller `ID` handed out (default 65519)")
	return func(pos []string) (*Command, error) {
		p.NQN = pos[0]
		return ctlEdit("add_subsystem", p)
	}
}

func addNamespaceFlags(fs *flag.FlagSet) func([]string) (*Command, error) {
	var p api.NamespaceParams
	var size *api.ByteSize
	uintVar(fs, &p.NSID, "nsid", 0, "namespace ID `NSID` (default: the lowest free one)")
	fs.StringVar(&p.Backend, "backend", "", "`BACKEND`: file, block, rbd or nullblk (required)")
	fs.StringVar(&p.Path, "path", "", "file: the image file (created when -size is given); block: the block device (a `PATH`)")
	sizeVar(fs, &size, "size", "file: the image's `SIZE` (it grows, never shrinks); nullblk: the size; rbd: with -create, the new image's")
	uintVar(fs, &p.BlockSize, "block-size", 0, "logical block size in `BYTES`, 512 or 4096 (default 512; block: the device's)")
	fs.BoolVar(&p.ReadOnly, "read-only", false, "hosts may read but not write")
	fs.BoolVar(&p.Buffered, "buffered", false, "file: go through the page cache instead of O_DIRECT")
	fs.StringVar(&p.Pool, "pool", "", "rbd: the image's `POOL`")
	fs.StringVar(&p.RadosNamespace, "rados-namespace", "", "rbd: the image's RADOS `NAMESPACE` in the pool")
	fs.StringVar(&p.Image, "image", "", "rbd: the `IMAGE` (the cluster is the one the top-level ceph block names)")
	fs.BoolVar(&p.Create, "create", false, "rbd: create the image with -size if it does not exist")
	fs.StringVar(&p.UUID, "uuid", "", "namespace `UUID` hosts see (default: derived from the NQN and NSID)")
	uintVar(fs, &p.ANAGroup, "ana-group", 0, "ANA `GROUP` of the namespace, 1 to 128 (default 1)")
	hostsFlag(fs, &p.Hosts)
	optBoolVar(fs, &p.Reservations, "reservations", "NVMe reservations (default true; -reservations=false answers them Invalid Opcode)")
	return func(pos []string) (*Command, error) {
		p.NQN = pos[0]
		if size != nil {
			p.Size = *size
		}
		return ctlEdit("add_namespace", p)
	}
}

// Stdin is where `-dhchap-key -` reads a secret from.
var Stdin io.Reader = os.Stdin

// hostKeyFlags takes the host's keys: from a file the daemon reads, or
// from standard input with "-". A key on the command line would be in the
// process list for every user to see.
func hostKeyFlags(method string) func(*flag.FlagSet) func([]string) (*Command, error) {
	return func(fs *flag.FlagSet) func([]string) (*Command, error) {
		var p api.HostParams
		fs.StringVar(&p.DHCHAPKeyFile, "dhchap-key-file", "", "the host's DH-HMAC-CHAP secret is in `FILE` (absolute, mode 0600)")
		fs.StringVar(&p.DHCHAPCtrlKeyFile, "dhchap-ctrl-key-file", "", "the controller's secret, for bidirectional authentication, is in `FILE`")
		fs.StringVar(&p.DHCHAPKey, "dhchap-key", "", "the host's secret, `DHHC-1:NN:...:`, or - to read it from standard input (a secret given here is visible in ps: prefer - or -dhchap-key-file)")
		fs.StringVar(&p.DHCHAPCtrlKey, "dhchap-ctrl-key", "", "the controller's secret, `DHHC-1:NN:...:`, or - to read it from standard input (prefer - or -dhchap-ctrl-key-file)")
		fs.StringVar(&p.TLSKeyFile, "tls-key-file", "", "the host's TLS PSK, `NVMeTLSkey-1:NN:...:`, is in `FILE` (absolute, mode 0600)")
		fs.StringVar(&p.TLSKey, "tls-key", "", "the host's TLS PSK, `NVMeTLSkey-1:NN:...:`, or - to read it from standard input (prefer - or -tls-key-file)")
		fs.StringVar(&p.TLSDerivation, "tls-derivation", "", "how the host's libnvme derives its TLS keys: `rfc8446` (the default), compat or libnvme-1.7")
		fs.Func("dhchap-hashes", "this host's hashes, `sha512,…` in order of preference, within the subsystem's", func(s string) error {
			p.DHCHAPHashes = strings.Split(s, ",")
			return nil
		})
		fs.Func("dhchap-dhgroups", "this host's DH groups, `ffdhe8192,…` in order of preference, within the subsystem's", func(s string) error {
			p.DHCHAPDHGroups = strings.Split(s, ",")
			return nil
		})
		return func(pos []string) (*Command, error) {
			p.NQN, p.Host = pos[0], pos[1]
			if err := keysFromStdin(&p); err != nil {
				return nil, err
			}
			return ctlEdit(method, p)
		}
	}
}

func hostFlags(method string) func(*flag.FlagSet) func([]string) (*Command, error) {
	return func(*flag.FlagSet) func([]string) (*Command, error) {
		return func(pos []string) (*Command, error) {
			return ctlEdit(method, api.HostParams{NQN: pos[0], Host: pos[1]})
		}
	}
}

func setSubsystemFlags(fs *flag.FlagSet) func([]string) (*Command, error) {
	var p api.SubsystemSet
	fs.BoolFunc("allow-any-host", "true: any host may connect; false: only the allowed hosts (the others are disconnected)", func(s string) error {
		v, err := strconv.ParseBool(s)
		p.AllowAnyHost = &v
		return err
	})
	idFlag := func(name, usage string, to **uint16) {
		fs.Func(name, usage, func(s string) error {
			v, err := parseUint16(s)
			if err != nil {
				return fmt.Errorf("want a number from 1 to 65519")
			}
			*to = &v
			return nil
		})
	}
	idFlag("cntlid-min", "lowest controller `ID` handed out to new controllers", &p.CntlidMin)
	idFlag("cntlid-max", "highest controller `ID` handed out to new controllers", &p.CntlidMax)
	return func(pos []string) (*Command, error) {
		p.NQN = pos[0]
		return ctlEdit("set_subsystem", p)
	}
}

func setNamespaceFlags(fs *flag.FlagSet) func([]string) (*Command, error) {
	var p api.NamespaceSet
	sizeVar(fs, &p.Size, "size", "the new `SIZE`")
	qosFlags(fs, &p.QoS)
	fs.Func("ana-group", "move the namespace to ANA `GROUP` (1 to 128)", func(s string) error {
		g, err := parseUint32(s)
		if err != nil {
			return fmt.Errorf("want a number from 1 to 128")
		}
		p.ANAGroup = &g
		return nil
	})
	hostsFlag(fs, &p.Hosts)
	optBoolVar(fs, &p.Reservations, "reservations", "turn NVMe reservations on or off (-reservations=false) in place")
	return func(pos []string) (*Command, error) {
		nsid, err := parseNSID(pos[1])
		if err != nil {
			return nil, err
		}
		p.NQN, p.NSID = pos[0], nsid
		return ctlEdit("set_namespace", p)
	}
}

func setANAFlags(*flag.FlagSet) func([]string) (*Command, error) {
	return func(pos []string) (*Command, error) {
		port, err := parseUint16(pos[0])
		if err != nil {
			return nil, fmt.Errorf("port ID %q: want a number from 0 to 65535", pos[0])
		}
		group, err := parseUint32(pos[1])
		if err != nil {
			return nil, fmt.Errorf("ANA group %q: want a number from 1 to 128", pos[1])
		}
		if err := checkANAState(pos[2]); err != nil {
			return nil, err
		}
		return ctlEdit("set_ana_state", api.ANAParams{Port: port, Group: group, State: pos[2]})
	}
}

func removePortFlags(*flag.FlagSet) func([]string) (*Command, error) {
	return func(pos []string) (*Command, error) {
		id, err := parseUint16(pos[0])
		if err != nil {
			return nil, fmt.Errorf("port ID %q: want a number from 0 to 65535", pos[0])
		}
		return ctlEdit("remove_port", api.PortRef{ID: id})
	}
}

func parseNSID(s string) (uint32, error) {
	nsid, err := parseUint32(s)
	if err != nil {
		return 0, fmt.Errorf("NSID %q: want a number", s)
	}
	return nsid, nil
}

// keysFromStdin replaces a "-" key with the first line of standard input.
func keysFromStdin(p *api.HostParams) error {
	n := 0
	for _, k := range []string{p.DHCHAPKey, p.DHCHAPCtrlKey, p.TLSKey} {
		if k == "-" {
			n++
		}
	}
	if n > 1 {
		return errors.New("only one secret can come from standard input (-dhchap-key -, -dhchap-ctrl-key -, -tls-key -); put the others in files")
	}
	for _, k := range []*string{&p.DHCHAPKey, &p.DHCHAPCtrlKey, &p.TLSKey} {
		if *k != "-" {
			continue
		}
		line, err := bufio.NewReader(io.LimitReader(Stdin, 4<<10)).ReadString('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("reading the secret from standard input: %w", err)
		}
		if *k = strings.TrimSpace(line); *k == "" {
			return errors.New("no secret on standard input")
		}
	}
	return nil
}

// parseANA reads -ana's GROUP=STATE.
func parseANA(v string) (uint32, string, error) {
	gs, st, ok := strings.Cut(v, "=")
	g, err := parseUint32(gs)
	if !ok || err != nil || g < 1 || g > nvme.MaxANAGroups {
		return 0, "", fmt.Errorf("%q: want GROUP=STATE, GROUP a number from 1 to %d", v, nvme.MaxANAGroups)
	}
	if err := checkANAState(st); err != nil {
		return 0, "", err
	}
	return g, st, nil
}

// checkANAState refuses a state the configuration does not know.
func checkANAState(st string) error {
	if !slices.Contains(config.ANAStates, st) {
		return fmt.Errorf("ANA state %q: want one of %s", st, strings.Join(config.ANAStates, ", "))
	}
	return nil
}

// parseReferral reads -referral's [TRANSPORT://]ADDRESS[:PORT]; an IPv6
// address with a port is bracketed, as in a URL.
func parseReferral(v string) (api.Referral, error) {
	var r api.Referral
	rest := v
	if t, a, ok := strings.Cut(v, "://"); ok {
		r.Transport, rest = t, a
	}
	if host, port, err := net.SplitHostPort(rest); err == nil {
		n, err := parseUint16(port)
		if err != nil {
			return r, fmt.Errorf("referral %q: port %q: want a number from 0 to 65535", v, port)
		}
		r.Address, r.Port = host, n
		return r, nil
	}
	r.Address = strings.TrimSuffix(strings.TrimPrefix(rest, "["), "]")
	if r.Address == "" {
		return r, fmt.Errorf("referral %q: no address", v)
	}
	return r, nil
}
