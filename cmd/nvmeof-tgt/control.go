package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"golang.org/x/sys/unix"
)

// The admin socket speaks one JSON request and one JSON reply per
// connection: the client's ctl arguments in, the text to print out.
type ctlRequest struct {
	Args []string `json:"args"`
}

type ctlReply struct {
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
}

type controlServer struct {
	ln   net.Listener
	path string
	wg   sync.WaitGroup
}

// serveControl listens on the admin socket, readable by root (and the
// daemon's own user) only.
func serveControl(path string, d *daemon, cfgPath string) (*controlServer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("control.socket: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("control.socket %s: another nvmeof-tgt answers there; stop it first, or give this one its own control.socket", path)
	}
	os.Remove(path) // a stale socket of a daemon that died
	old := unix.Umask(0o177)
	ln, err := net.Listen("unix", path)
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("control.socket %s: %w", path, err)
	}
	cs := &controlServer{ln: ln, path: path}
	d.log.WithField("socket", path).Info("admin socket ready")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cs.wg.Add(1)
			go func() {
				defer cs.wg.Done()
				cs.handle(c.(*net.UnixConn), d, cfgPath)
			}()
		}
	}()
	return cs, nil
}

func (cs *controlServer) close() {
	cs.ln.Close()
	cs.wg.Wait()
	os.Remove(cs.path)
}

func (cs *controlServer) handle(c *net.UnixConn, d *daemon, cfgPath string) {
	defer c.Close()
	if err := checkPeer(c); err != nil {
		json.NewEncoder(c).Encode(ctlReply{Error: err.Error()})
		return
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	var req ctlRequest
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&req); err != nil {
		json.NewEncoder(c).Encode(ctlReply{Error: "malformed request: " + err.Error()})
		return
	}
	var out bytes.Buffer
	err := control(d, cfgPath, req.Args, &out)
	rep := ctlReply{Output: out.String()}
	if err != nil {
		rep.Error = err.Error()
		d.log.WithField("command", strings.Join(req.Args, " ")).WithError(err).Warn("admin command failed")
	} else if len(req.Args) > 0 && req.Args[0] != "list" && req.Args[0] != "save" {
		d.log.WithField("command", strings.Join(req.Args, " ")).Info("admin command applied")
	}
	json.NewEncoder(c).Encode(rep)
}

// checkPeer admits root and the daemon's own user.
func checkPeer(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cerr != nil {
		return cerr
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Getuid() {
		return errors.New("permission denied: the admin socket is for root")
	}
	return nil
}

const ctlUsage = `usage: nvmeof-tgt ctl [-socket PATH] COMMAND
  list [-json]                         the running state: ports, subsystems, namespaces, hosts, controllers
  add port -id N -address ADDR [-port 4420] [-inline-data-size B] [-max-queue-size N]
  add subsystem NQN [-serial S] [-model M] [-allow-any-host] [-port ID]...
  add namespace NQN -backend file|block|nullblk [-nsid N] [-path P] [-size S] [-block-size B]
                    [-read-only] [-buffered] [-uuid U]
  add host NQN HOSTNQN                 allow HOSTNQN into subsystem NQN
  set subsystem NQN -allow-any-host=true|false
  set namespace NQN NSID -size S       grow a namespace in place (hosts see the new size)
  remove port ID | subsystem NQN | namespace NQN NSID | host NQN HOSTNQN
  save FILE|-                          write the running configuration as YAML
  reload                               re-read the configuration file, as SIGHUP does
Changes apply at once and last until the daemon stops or reloads its
file; save them to keep them.`

// control runs one admin command against the daemon.
func control(d *daemon, cfgPath string, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New(ctlUsage)
	}
	switch args[0] {
	case "list":
		fs := newFlags("list")
		asJSON := fs.Bool("json", false, "print JSON")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return list(d, *asJSON, out)
	case "save":
		y, err := config.Marshal(d.running())
		if err != nil {
			return err
		}
		out.Write(y)
		return nil
	case "reload":
		if err := d.reload(cfgPath); err != nil {
			return err
		}
		gen, _, _ := d.generation()
		fmt.Fprintf(out, "reloaded %s: generation %d\n", cfgPath, gen)
		return nil
	case "add", "remove", "set":
		if len(args) < 2 {
			return errors.New(ctlUsage)
		}
		next := d.running()
		if err := edit(next, args[0], args[1], args[2:]); err != nil {
			return err
		}
		next.ApplyDefaults() // what the edit added gets the limits a file would
		return d.apply(next)
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(out, ctlUsage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], ctlUsage)
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// positional parses flags that may come before or after the positional
// arguments, and checks there are exactly n of those.
func positional(fs *flag.FlagSet, args []string, n int, usage string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%v\nusage: %s", err, usage)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) != n {
		return nil, fmt.Errorf("usage: %s", usage)
	}
	return pos, nil
}

type uint16List []uint16

func (l *uint16List) String() string { return fmt.Sprint(*l) }
func (l *uint16List) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return err
	}
	*l = append(*l, uint16(v))
	return nil
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// edit changes the configuration c as one ctl add/remove/set command says.
func edit(c *config.Config, verb, kind string, args []string) error {
	sub := func(nqn string) (*config.Subsystem, error) {
		for i := range c.Subsystems {
			if c.Subsystems[i].NQN == nqn {
				return &c.Subsystems[i], nil
			}
		}
		return nil, fmt.Errorf("no subsystem %s", nqn)
	}
	// subNSID resolves an NQN NSID pair of arguments.
	subNSID := func(pos []string) (*config.Subsystem, uint32, error) {
		s, err := sub(pos[0])
		if err != nil {
			return nil, 0, err
		}
		id, err := strconv.ParseUint(pos[1], 10, 32)
		if err != nil {
			return nil, 0, fmt.Errorf("NSID %q: %w", pos[1], err)
		}
		return s, uint32(id), nil
	}
	switch verb + " " + kind {
	case "add port":
		fs := newFlags("add port")
		var p config.Port
		id := fs.Uint("id", 0, "")
		fs.StringVar(&p.Address, "address", "", "")
		svc := fs.Uint("port", config.DefaultServiceID, "")
		inline := fs.Uint("inline-data-size", config.DefaultInlineDataSize, "")
		depth := fs.Uint("max-queue-size", config.DefaultMaxQueueSize, "")
		if _, err := positional(fs, args, 0, "add port -id N -address ADDR [-port P]"); err != nil {
			return err
		}
		if *id > 0xffff || *svc > 0xffff || *depth > 0xffff || *inline > 1<<31 {
			return errors.New("add port: a value is out of range")
		}
		p.ID, p.Port, p.InlineDataSize, p.MaxQueueSize = uint16(*id), uint16(*svc), uint32(*inline), uint16(*depth)
		p.Transport = "rdma"
		for _, q := range c.Ports {
			if q.ID == p.ID {
				return fmt.Errorf("port %d already exists", p.ID)
			}
		}
		c.Ports = append(c.Ports, p)
	case "remove port":
		pos, err := positional(newFlags("remove port"), args, 1, "remove port ID")
		if err != nil {
			return err
		}
		id, err := strconv.ParseUint(pos[0], 10, 16)
		if err != nil {
			return fmt.Errorf("port ID %q: %w", pos[0], err)
		}
		n := len(c.Ports)
		c.Ports = slices.DeleteFunc(c.Ports, func(p config.Port) bool { return p.ID == uint16(id) })
		if len(c.Ports) == n {
			return fmt.Errorf("no port %d", id)
		}
		for i := range c.Subsystems {
			c.Subsystems[i].Ports = slices.DeleteFunc(c.Subsystems[i].Ports, func(p uint16) bool { return p == uint16(id) })
		}
	case "add subsystem":
		fs := newFlags("add subsystem")
		var s config.Subsystem
		var ports uint16List
		var hosts stringList
		fs.StringVar(&s.Serial, "serial", "", "")
		fs.StringVar(&s.Model, "model", "", "")
		fs.BoolVar(&s.AllowAnyHost, "allow-any-host", false, "")
		fs.Var(&ports, "port", "")
		fs.Var(&hosts, "host", "")
		pos, err := positional(fs, args, 1, "add subsystem NQN [-allow-any-host] [-port ID]... [-host HOSTNQN]...")
		if err != nil {
			return err
		}
		s.NQN, s.Ports, s.Hosts = pos[0], ports, hosts
		if _, err := sub(s.NQN); err == nil {
			return fmt.Errorf("subsystem %s already exists", s.NQN)
		}
		c.Subsystems = append(c.Subsystems, s)
	case "remove subsystem":
		pos, err := positional(newFlags("remove subsystem"), args, 1, "remove subsystem NQN")
		if err != nil {
			return err
		}
		if _, err := sub(pos[0]); err != nil {
			return err
		}
		c.Subsystems = slices.DeleteFunc(c.Subsystems, func(s config.Subsystem) bool { return s.NQN == pos[0] })
	case "set subsystem":
		fs := newFlags("set subsystem")
		anyHost := fs.String("allow-any-host", "", "")
		pos, err := positional(fs, args, 1, "set subsystem NQN -allow-any-host=true|false")
		if err != nil {
			return err
		}
		s, err := sub(pos[0])
		if err != nil {
			return err
		}
		if *anyHost == "" {
			return errors.New("set subsystem: nothing to set")
		}
		v, err := strconv.ParseBool(*anyHost)
		if err != nil {
			return fmt.Errorf("-allow-any-host: %w", err)
		}
		s.AllowAnyHost = v
	case "add host", "remove host":
		pos, err := positional(newFlags(verb+" host"), args, 2, verb+" host NQN HOSTNQN")
		if err != nil {
			return err
		}
		s, err := sub(pos[0])
		if err != nil {
			return err
		}
		has := slices.Contains(s.Hosts, pos[1])
		switch {
		case verb == "add" && has:
			return fmt.Errorf("host %s is already allowed into %s", pos[1], s.NQN)
		case verb == "add":
			s.Hosts = append(s.Hosts, pos[1])
		case !has:
			return fmt.Errorf("host %s is not on the allow-list of %s", pos[1], s.NQN)
		default:
			s.Hosts = slices.DeleteFunc(s.Hosts, func(h string) bool { return h == pos[1] })
		}
	case "add namespace":
		fs := newFlags("add namespace")
		var n config.Namespace
		nsid := fs.Uint("nsid", 0, "")
		fs.StringVar(&n.Backend, "backend", "", "")
		fs.StringVar(&n.Path, "path", "", "")
		size := fs.String("size", "0", "")
		bs := fs.Uint("block-size", 0, "")
		fs.BoolVar(&n.ReadOnly, "read-only", false, "")
		fs.BoolVar(&n.Buffered, "buffered", false, "")
		fs.StringVar(&n.UUID, "uuid", "", "")
		pos, err := positional(fs, args, 1, "add namespace NQN -backend B [-nsid N] [-path P] [-size S] ...")
		if err != nil {
			return err
		}
		s, err := sub(pos[0])
		if err != nil {
			return err
		}
		if n.Size, err = config.ParseSize(*size); err != nil {
			return fmt.Errorf("-size: %w", err)
		}
		if *nsid > 0xffffffff || *bs > 0xffffffff {
			return errors.New("add namespace: a value is out of range")
		}
		n.NSID, n.BlockSize = uint32(*nsid), uint32(*bs)
		if n.NSID == 0 { // the lowest free ID
			n.NSID = 1
			for slices.ContainsFunc(s.Namespaces, func(x config.Namespace) bool { return x.NSID == n.NSID }) {
				n.NSID++
			}
		}
		if n.BlockSize == 0 && n.Backend != "block" {
			n.BlockSize = config.DefaultBlockSize
		}
		s.Namespaces = append(s.Namespaces, n)
	case "set namespace":
		fs := newFlags("set namespace")
		size := fs.String("size", "", "")
		pos, err := positional(fs, args, 2, "set namespace NQN NSID -size S")
		if err != nil {
			return err
		}
		s, id, err := subNSID(pos)
		if err != nil {
			return err
		}
		if *size == "" {
			return errors.New("set namespace: nothing to set")
		}
		sz, err := config.ParseSize(*size)
		if err != nil {
			return fmt.Errorf("-size: %w", err)
		}
		i := slices.IndexFunc(s.Namespaces, func(x config.Namespace) bool { return x.NSID == id })
		if i < 0 {
			return fmt.Errorf("no namespace %d in %s", id, s.NQN)
		}
		s.Namespaces[i].Size = sz
	case "remove namespace":
		pos, err := positional(newFlags("remove namespace"), args, 2, "remove namespace NQN NSID")
		if err != nil {
			return err
		}
		s, id, err := subNSID(pos)
		if err != nil {
			return err
		}
		n := len(s.Namespaces)
		s.Namespaces = slices.DeleteFunc(s.Namespaces, func(x config.Namespace) bool { return x.NSID == id })
		if len(s.Namespaces) == n {
			return fmt.Errorf("no namespace %d in %s", id, s.NQN)
		}
	default:
		return fmt.Errorf("unknown command %q\n%s", verb+" "+kind, ctlUsage)
	}
	return nil
}

// State is what `ctl list -json` prints.
type State struct {
	Generation uint64      `json:"generation"`
	Ports      []PortState `json:"ports"`
	Subsystems []SubState  `json:"subsystems"`
}

type PortState struct {
	ID      uint16 `json:"id"`
	Address string `json:"address"`
	Port    uint16 `json:"port"`
}

type SubState struct {
	NQN          string      `json:"nqn"`
	Serial       string      `json:"serial"`
	Model        string      `json:"model"`
	AllowAnyHost bool        `json:"allow_any_host"`
	Hosts        []string    `json:"hosts"`
	Ports        []uint16    `json:"ports"`
	Namespaces   []NSState   `json:"namespaces"`
	Controllers  []CtrlState `json:"controllers"`
}

type NSState struct {
	NSID      uint32 `json:"nsid"`
	Backend   string `json:"backend"`
	Path      string `json:"path,omitempty"`
	SizeBytes uint64 `json:"size_bytes"`
	BlockSize uint32 `json:"block_size"`
	ReadOnly  bool   `json:"read_only"`
	UUID      string `json:"uuid"`
}

type CtrlState struct {
	CNTLID  uint16 `json:"cntlid"`
	Host    string `json:"host"`
	Port    uint16 `json:"port"`
	Queues  int    `json:"queues"`
	Created string `json:"created"`
}

func state(d *daemon) State {
	cfg := d.running()
	gen, _, _ := d.generation()
	st := State{Generation: gen, Ports: []PortState{}, Subsystems: []SubState{}}
	for _, p := range cfg.Ports {
		st.Ports = append(st.Ports, PortState{p.ID, p.Address, p.Port})
	}
	for _, sc := range cfg.Subsystems {
		s := d.target.Subsystem(sc.NQN)
		if s == nil {
			continue
		}
		ss := SubState{NQN: s.NQN, Serial: s.Serial, Model: s.Model, AllowAnyHost: sc.AllowAnyHost,
			Hosts: append([]string{}, sc.Hosts...), Ports: append([]uint16{}, sc.Ports...),
			Namespaces: []NSState{}, Controllers: []CtrlState{}}
		slices.Sort(ss.Hosts)
		for _, nc := range sc.Namespaces {
			ns := s.Namespace(nc.NSID)
			if ns == nil {
				continue
			}
			ss.Namespaces = append(ss.Namespaces, NSState{NSID: ns.ID, Backend: nc.Backend, Path: nc.Path,
				SizeBytes: ns.Blocks() << ns.BlockShift, BlockSize: 1 << ns.BlockShift, ReadOnly: ns.ReadOnly,
				UUID: config.FormatUUID(ns.UUID)})
		}
		slices.SortFunc(ss.Namespaces, func(a, b NSState) int { return int(a.NSID) - int(b.NSID) })
		for _, c := range s.Controllers() {
			var port uint16
			if c.Port != nil {
				port = c.Port.ID
			}
			ss.Controllers = append(ss.Controllers, CtrlState{c.ID, c.HostNQN, port, c.Queues(), c.Created.UTC().Format(time.RFC3339)})
		}
		st.Subsystems = append(st.Subsystems, ss)
	}
	return st
}

func list(d *daemon, asJSON bool, out io.Writer) error {
	st := state(d)
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "configuration generation %d\n", st.Generation)
	for _, p := range st.Ports {
		fmt.Fprintf(w, "port %d  rdma %s\n", p.ID, netJoin(p.Address, p.Port))
	}
	for _, s := range st.Subsystems {
		ports := "all ports"
		if len(s.Ports) > 0 {
			ports = "ports " + fmt.Sprint(s.Ports)
		}
		access := "any host"
		if !s.AllowAnyHost {
			access = fmt.Sprintf("%d allowed hosts", len(s.Hosts))
		}
		fmt.Fprintf(w, "subsystem %s  %s, %s\n", s.NQN, access, ports)
		for _, n := range s.Namespaces {
			fmt.Fprintf(w, "  namespace %d\t%s %s\t%s, %d-byte blocks%s\tuuid %s\n", n.NSID, n.Backend, n.Path,
				config.Size(n.SizeBytes), n.BlockSize, map[bool]string{true: ", read-only"}[n.ReadOnly], n.UUID)
		}
		for _, h := range s.Hosts {
			fmt.Fprintf(w, "  host %s\n", h)
		}
		for _, c := range s.Controllers {
			fmt.Fprintf(w, "  controller %d\t%s\tport %d, %d queues, since %s\n", c.CNTLID, c.Host, c.Port, c.Queues, c.Created)
		}
	}
	return w.Flush()
}

func netJoin(addr string, port uint16) string {
	return net.JoinHostPort(addr, strconv.Itoa(int(port)))
}
