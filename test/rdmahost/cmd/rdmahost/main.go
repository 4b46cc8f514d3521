// Command rdmahost drives an NVMe-oF RDMA target the way the Linux host
// never does, for the e2e scenarios (81-churn) and the soak test:
//
//	rdmahost abandon   -addr A [-port P] -nqn NQN [-n 300] [-cmds 24]
//	rdmahost noconnect -addr A [-port P] [-hold 15s]
//	rdmahost flood     -addr A [-port P] -nqn NQN [-n 64]
//	rdmahost connect   -addr A [-port P] -nqn NQN
//	rdmahost read      -addr A [-port P] -nqn NQN -nsid N[,N...] [-host HOSTNQN]
//	rdmahost hold      -addr A [-port P] [-nqn NQN] [-noconnect N] [-readers N] [-writers N]
//	                   [-qsize 128] [-size 1048576] [-nsid N] [-slba LBA]
//
// abandon connects a controller (admin queue, enable, one I/O queue), posts
// -cmds reads on the I/O queue and Identify commands on the admin queue
// without waiting, and destroys both queue pairs without a disconnect; -n
// times. noconnect connects an admin queue pair and sends nothing, then
// says whether the target closed it within -hold. flood connects an admin
// queue and posts -n Keep Alives, more than its queue holds. connect is a
// Connect and an Identify and a clean disconnect. read connects a
// controller and an I/O queue and reads block 0 of each namespace of
// -nsid, whatever the namespace list says, and prints each read's status: a
// command the Linux host does not send to an NSID it has no namespace
// for (its passthrough refuses an NSID other than the device's). hold is
// a hostile host that runs until SIGINT or SIGTERM (hold.go).
//
// Each prints one line of key=value results; it exits 1 on an error.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/rdmahost"
)

// hostNQN names this host to the target unless -host names another.
const hostNQN = "nqn.2014-08.org.nvmexpress:uuid:rdmahost"

type options struct {
	addr   string
	port   int
	nqn    string
	n      int
	cmds   int
	qsize  int
	hold   time.Duration
	closed bool
	host   string
	nsids  string

	noConnect, readers, writers int
	size                        int
	slba                        uint64
}

// commands are the subcommands, by name.
var commands = map[string]func(options) error{
	"abandon": abandon, "noconnect": noConnect, "flood": flood, "connect": connect, "read": read, "hold": hold,
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var o options
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	fs.StringVar(&o.addr, "addr", "", "the target's address (required)")
	fs.IntVar(&o.port, "port", 4420, "the target's port")
	fs.StringVar(&o.nqn, "nqn", "", "the subsystem NQN (abandon, flood, connect)")
	fs.IntVar(&o.n, "n", 0, "abandon: controllers to abandon (300); flood: commands to post (64)")
	fs.IntVar(&o.cmds, "cmds", 24, "abandon: reads posted on the I/O queue before it is abandoned")
	fs.IntVar(&o.qsize, "qsize", 32, "entries of each queue")
	fs.DurationVar(&o.hold, "hold", 15*time.Second, "noconnect: how long to wait for the target to close the queue pair")
	fs.BoolVar(&o.closed, "want-closed", false, "noconnect: exit 1 unless the target closed the queue pair within -hold")
	fs.StringVar(&o.host, "host", hostNQN, "the host NQN to connect as")
	fs.StringVar(&o.nsids, "nsid", "1", "read: the namespace IDs to read from, comma-separated; hold: the namespace")
	fs.IntVar(&o.noConnect, "noconnect", 0, "hold: queue pairs to keep connected without a Connect")
	fs.IntVar(&o.readers, "readers", 0, "hold: controllers whose I/O queue is kept full of reads it never takes the responses of")
	fs.IntVar(&o.writers, "writers", 0, "hold: the same with writes (they overwrite -size bytes at -slba)")
	fs.IntVar(&o.size, "size", 1<<20, "hold: bytes of each read or write")
	fs.Uint64Var(&o.slba, "slba", 0, "hold: the first block of every read and write")
	fs.Parse(os.Args[2:])
	if o.addr == "" || o.qsize < 2 || o.qsize > 1024 {
		fmt.Fprintln(os.Stderr, "rdmahost: -addr is required and -qsize must be 2 to 1024")
		os.Exit(2)
	}
	run, ok := commands[os.Args[1]]
	if !ok {
		usage()
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "rdmahost "+os.Args[1]+":", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: rdmahost abandon|noconnect|flood|connect|read|hold -addr ADDR [-port PORT] [-nqn NQN] [flags]")
	os.Exit(2)
}

// controller is a connected, enabled controller's admin queue.
func controller(o options) (*rdmahost.Conn, uint16, error) {
	if o.nqn == "" {
		return nil, 0, fmt.Errorf("-nqn is required")
	}
	admin, err := rdmahost.Dial(o.addr, o.port, 0, uint16(o.qsize-1))
	if err != nil {
		return nil, 0, err
	}
	st, cntlid, err := admin.Connect(o.host, o.nqn, nvme.ControllerIDDynamic, 0)
	if err == nil && st != 0 {
		err = fmt.Errorf("admin Connect: status %#x", st)
	}
	if err == nil {
		err = admin.Enable()
	}
	if err != nil {
		admin.Abandon()
		return nil, 0, err
	}
	return admin, cntlid, nil
}

// blockSize is namespace nsid's LBA data size, from Identify Namespace.
func blockSize(admin *rdmahost.Conn, nsid uint32) (int, error) {
	id, st, err := admin.Identify(nvme.CNSNamespace, nsid)
	if err != nil {
		return 0, err
	}
	if st != 0 {
		return 0, fmt.Errorf("Identify Namespace %d: status %#x", nsid, st)
	}
	lbaf := int(id[26] & 0xf)
	return 1 << id[128+4*lbaf+2], nil
}

func abandon(o options) error {
	if o.n == 0 {
		o.n = 300
	}
	if o.cmds > 2*o.qsize {
		return fmt.Errorf("-cmds %d: at most twice -qsize", o.cmds)
	}
	start := time.Now()
	bs := 0
	for i := range o.n {
		admin, cntlid, err := controller(o)
		if err != nil {
			return fmt.Errorf("controller %d: %w", i, err)
		}
		if bs == 0 {
			if bs, err = blockSize(admin, 1); err != nil {
				admin.Abandon()
				return err
			}
		}
		if err := abandonIO(o, admin, cntlid, bs); err != nil {
			admin.Abandon()
			return fmt.Errorf("controller %d: %w", i, err)
		}
		// Commands in flight on the admin queue too.
		for range 4 {
			if _, err := admin.PostIdentify(nvme.CNSController, 0); err != nil {
				admin.Abandon()
				return fmt.Errorf("controller %d: %w", i, err)
			}
		}
		admin.Abandon()
	}
	fmt.Printf("abandoned=%d cmds_per_queue=%d secs=%.1f\n", o.n, o.cmds, time.Since(start).Seconds())
	return nil
}

// abandonIO connects I/O queue 1, posts o.cmds reads of 4 KiB and
// abandons it.
func abandonIO(o options, admin *rdmahost.Conn, cntlid uint16, bs int) error {
	io, err := rdmahost.Dial(o.addr, o.port, 1, uint16(o.qsize-1))
	if err != nil {
		return err
	}
	defer io.Abandon()
	st, _, err := io.Connect(o.host, o.nqn, cntlid, 0)
	if err == nil && st != 0 {
		err = fmt.Errorf("I/O Connect: status %#x", st)
	}
	if err != nil {
		return err
	}
	nlb := uint16(rdmahost.DataSize / bs)
	for j := range o.cmds {
		if _, err := io.PostRead(1, uint64(j)*uint64(nlb), nlb, bs); err != nil {
			return err
		}
	}
	return nil
}

func noConnect(o options) error {
	c, err := rdmahost.Dial(o.addr, o.port, 0, uint16(o.qsize-1))
	if err != nil {
		return err
	}
	start := time.Now()
	closed, err := c.WaitClosed(o.hold)
	took := time.Since(start)
	if closed {
		c.Abandon()
	} else {
		c.Close()
	}
	if err != nil {
		return err
	}
	fmt.Printf("closed_by_target=%t secs=%.1f\n", closed, took.Seconds())
	if o.closed && !closed {
		return fmt.Errorf("the target kept a queue pair without a Connect for %s", o.hold)
	}
	return nil
}

func flood(o options) error {
	if o.n == 0 {
		o.n = 2 * o.qsize
	}
	admin, _, err := controller(o)
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := admin.Flood(o.n); err != nil {
		return err
	}
	got := 0
	for ; got < o.n; got++ {
		if _, err := admin.WaitResponse(rdmahost.Timeout); err != nil {
			fmt.Printf("posted=%d responses=%d stopped=%q\n", o.n, got, err)
			return nil
		}
	}
	fmt.Printf("posted=%d responses=%d\n", o.n, got)
	return nil
}

func connect(o options) error {
	admin, _, err := controller(o)
	if err != nil {
		return err
	}
	id, st, err := admin.Identify(nvme.CNSController, 0)
	if err != nil {
		admin.Abandon()
		return err
	}
	if st != 0 {
		admin.Abandon()
		return fmt.Errorf("Identify Controller: status %#x", st)
	}
	fmt.Printf("subnqn=%s\n", cstring(id[768:1024]))
	return admin.Close()
}

// read prints the status of a 512-byte read of block 0 of each of o.nsids
// on I/O queue 1 of a new controller of o.host.
func read(o options) error {
	nsids, err := parseNSIDs(o.nsids)
	if err != nil {
		return err
	}
	admin, cntlid, err := controller(o)
	if err != nil {
		return err
	}
	io, err := rdmahost.Dial(o.addr, o.port, 1, uint16(o.qsize-1))
	if err != nil {
		admin.Abandon()
		return err
	}
	st, _, err := io.Connect(o.host, o.nqn, cntlid, 0)
	if err == nil && st != 0 {
		err = fmt.Errorf("I/O Connect: status %#x", st)
	}
	for _, nsid := range nsids {
		if err != nil {
			break
		}
		var r rdmahost.Response
		cid := io.NextCID()
		addr, rkey, _ := io.Data(cid)
		if r, err = io.Command(rdmahost.ReadCommand(cid, nsid, 0, 1, addr, 512, rkey), nil); err == nil {
			fmt.Printf("nsid=%d status=%#x\n", nsid, rdmahost.Status(r))
		}
	}
	if err != nil {
		io.Abandon()
		admin.Abandon()
		return err
	}
	if err := io.Close(); err != nil {
		admin.Abandon()
		return err
	}
	return admin.Close()
}

// parseNSIDs parses -nsid.
func parseNSIDs(s string) ([]uint32, error) {
	var nsids []uint32
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(f, 0, 32)
		if err != nil {
			return nil, fmt.Errorf("-nsid %q: %w", s, err)
		}
		nsids = append(nsids, uint32(n))
	}
	return nsids, nil
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
