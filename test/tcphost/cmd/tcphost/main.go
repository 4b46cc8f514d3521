// Command tcphost holds what one NVMe/TCP host can take from a target
// until it is killed or -hold passes:
//
//	tcphost stall -addr A:P -n 1000
//	    opens n connections and sends nothing on them;
//	tcphost hold -addr A:P -nqn SUBNQN -queues 4 -depth 127 -size 1048576
//	    connects a controller with that many I/O queues and fills each
//	    with commands of -size bytes: writes on odd queues, whose data it
//	    never sends after the target's R2T, and reads on even queues,
//	    whose data it never reads from the socket. The admin queue keeps
//	    the controller alive;
//	tcphost idle -addr A:P -nqn SUBNQN -queues 2
//	    connects a controller with that many I/O queues and sends
//	    nothing but a Keep Alive every 2.5 s, as the Linux host does at
//	    its default KATO: what a connected host with no I/O costs;
//	tcphost probe -addr A:P -nqn SUBNQN
//	    connects a controller and one I/O queue, and times an Identify, a
//	    4 KiB read and a 1 MiB read, as a well-behaved host would see them.
//
// It prints one line of counts when it ends.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/tcphost"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tcphost stall|hold|idle|probe|rate [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", "", "the target's address:port")
	n := fs.Int("n", 1000, "stall: connections to open")
	nqn := fs.String("nqn", "", "hold: the subsystem NQN")
	queues := fs.Int("queues", 4, "hold: I/O queues")
	depth := fs.Int("depth", 127, "hold: commands per I/O queue")
	size := fs.Uint("size", 1<<20, "hold: bytes per command")
	nsid := fs.Uint("nsid", 1, "hold: namespace")
	lba := fs.Uint("lba", 512, "hold: the namespace's block size")
	hold := fs.Duration("hold", time.Hour, "how long to hold before ending (rate: to measure)")
	from := fs.String("from", "", "the local address to connect from")
	fs.Parse(os.Args[2:])
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	deadline := time.After(*hold)
	switch os.Args[1] {
	case "stall":
		var conns []*tcphost.Conn
		failed := 0
		for range *n {
			c, err := tcphost.Dial(*addr)
			if err != nil {
				failed++
				continue
			}
			conns = append(conns, c)
		}
		fmt.Printf("stall: %d connections opened, %d dials failed\n", len(conns), failed)
		select {
		case <-stop:
		case <-deadline:
		}
		for _, c := range conns {
			c.Close()
		}
	case "hold":
		holdQueues(*addr, *nqn, *queues, *depth, uint32(*size), uint32(*nsid), uint32(*lba), stop, deadline)
	case "idle":
		idle(*addr, *nqn, *queues, stop, deadline)
	case "probe":
		probe(*addr, *nqn, uint32(*nsid), uint32(*lba))
	case "rate":
		rate(*from, *addr, *nqn, *depth, uint32(*size), uint32(*nsid), uint32(*lba), *hold)
	default:
		fmt.Fprintf(os.Stderr, "tcphost: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "tcphost:", err)
	os.Exit(1)
}

// idle holds a connected controller without I/O until stopped.
func idle(addr, nqn string, queues int, stop <-chan os.Signal, deadline <-chan time.Time) {
	admin, err := tcphost.Controller("", addr, nqn, "", uint16(queues))
	if err != nil {
		fatal(err)
	}
	defer admin.Close()
	for qid := 1; qid <= queues; qid++ {
		io, err := admin.IOQueue("", addr, nqn, uint16(qid), 32)
		if err != nil {
			fatal(err)
		}
		defer io.Close()
	}
	fmt.Printf("idle: controller %d, %d I/O queues\n", admin.Controller(), queues)
	tick := time.NewTicker(2500 * time.Millisecond)
	defer tick.Stop()
	kas := 0
	for {
		select {
		case <-stop:
		case <-deadline:
		case <-tick.C:
			if err := admin.KeepAlive(); err != nil {
				fatal(err)
			}
			if _, err := admin.Next(); err != nil {
				fatal(err)
			}
			kas++
			continue
		}
		fmt.Printf("idle: %d keep alives\n", kas)
		return
	}
}

// probe times what a well-behaved host does first.
func probe(addr, nqn string, nsid, lba uint32) {
	t0 := time.Now()
	admin, err := tcphost.Controller("", addr, nqn, "nqn.2014-08.org.nvmexpress:uuid:7e57ca5e-0000-4000-8000-0000000000ff", 1)
	if err != nil {
		fatal(err)
	}
	defer admin.Close()
	fmt.Printf("probe: admin connect %v\n", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if st, err := admin.Identify(1); err != nil || st != 0 {
		fatal(fmt.Errorf("Identify: %v %v", st, err))
	}
	fmt.Printf("probe: identify %v\n", time.Since(t0).Round(time.Millisecond))
	io, err := admin.IOQueue("", addr, nqn, 1, 32)
	if err != nil {
		fatal(err)
	}
	for _, n := range []uint32{4096, 1 << 20} {
		t0 = time.Now()
		if st, err := io.Read(nsid, 0, n, lba); err != nil || st != 0 {
			fatal(fmt.Errorf("read of %d bytes: %v %v", n, st, err))
		}
		fmt.Printf("probe: read of %d bytes %v\n", n, time.Since(t0).Round(time.Millisecond))
	}
}

// holdQueues connects a controller and fills its I/O queues (writes on
// odd ones, reads on even ones), then keeps them full: a queue the target
// closes is connected and filled again a second later. It prints a "hold"
// line once every queue is full, and one with what it did at the end.
func holdQueues(addr, nqn string, queues, depth int, size, nsid, lba uint32, stop <-chan os.Signal, deadline <-chan time.Time) {
	admin, err := tcphost.Controller("", addr, nqn, "", uint16(queues))
	if err != nil {
		fatal(err)
	}
	var sent, closed atomic.Int64
	var full sync.WaitGroup
	done := make(chan struct{})
	for qid := 1; qid <= queues; qid++ {
		op := uint8(nvme.IOWrite)
		if qid%2 == 0 {
			op = nvme.IORead
		}
		full.Add(1)
		go func() {
			var once sync.Once
			for {
				err := fill(admin, addr, nqn, uint16(qid), depth, op, size, nsid, lba, &sent, func() { once.Do(full.Done) }, done)
				if err != nil {
					fmt.Fprintf(os.Stderr, "queue %d: %v\n", qid, err)
				}
				closed.Add(1)
				select {
				case <-done:
					return
				case <-time.After(time.Second):
				}
			}
		}()
	}
	full.Wait()
	fmt.Printf("hold: controller %d, %d I/O queues, %d commands of %d bytes sent\n", admin.Controller(), queues, sent.Load(), size)
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
		case <-deadline:
		case <-tick.C:
			if err := admin.KeepAlive(); err == nil {
				continue
			}
			fmt.Println("held: the admin queue closed")
		}
		close(done)
		fmt.Printf("held: %d commands sent, %d I/O queues closed by the target and taken again\n", sent.Load(), closed.Load())
		return
	}
}

// fill connects I/O queue qid, sends depth commands that it never
// finishes, calls full, and returns once the target closes the queue or
// done closes.
func fill(admin *tcphost.Conn, addr, nqn string, qid uint16, depth int, op uint8, size, nsid, lba uint32, sent *atomic.Int64, full func(), done <-chan struct{}) error {
	c, err := admin.IOQueue("", addr, nqn, qid, uint16(depth)+1)
	if err != nil {
		return err
	}
	defer c.Close()
	for i := range depth {
		slba := uint64(i) * uint64(size) / uint64(lba)
		if err := c.ReadWrite(op, nsid, slba, size, lba); err != nil {
			return err
		}
		sent.Add(1)
	}
	full()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-tick.C:
			if c.PeerClosed() {
				return nil
			}
		}
	}
}

// rate keeps depth reads of size bytes in flight on one I/O queue for d
// and prints the rate, as a well-behaved host's fio would see it.
func rate(from, addr, nqn string, depth int, size, nsid, lba uint32, d time.Duration) {
	admin, err := tcphost.Controller(from, addr, nqn, "nqn.2014-08.org.nvmexpress:uuid:7e57ca5e-0000-4000-8000-0000000000fe", 1)
	if err != nil {
		fatal(err)
	}
	defer admin.Close()
	c, err := admin.IOQueue(from, addr, nqn, 1, uint16(depth)+1)
	if err != nil {
		fatal(err)
	}
	for i := range depth {
		if err := c.ReadWrite(nvme.IORead, nsid, uint64(i)*uint64(size/lba), size, lba); err != nil {
			fatal(err)
		}
	}
	done, end := 0, time.Now().Add(d)
	for time.Now().Before(end) {
		rsp, err := c.Next()
		if err != nil || rsp.Status() != 0 {
			fatal(fmt.Errorf("read %d: %v %v", done, rsp, err))
		}
		done++
		if err := c.ReadWrite(nvme.IORead, nsid, uint64(done%1024)*uint64(size/lba), size, lba); err != nil {
			fatal(err)
		}
	}
	fmt.Printf("rate: %.0f reads/s of %d bytes at depth %d\n", float64(done)/d.Seconds(), size, depth)
}
