package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/rdmahost"
)

// hold is a hostile host that runs until SIGINT or SIGTERM, taking what it
// can of the target's shared resources and taking it again whenever the
// target lets go:
//
//   - -noconnect N queue pairs connected and never sent a Connect;
//   - -readers N controllers, each with an I/O queue full (-qsize) of
//     reads of -size bytes whose responses it never receives: it stops
//     posting receives, so each response SEND is retried (RNR) with its
//     data buffer held, and the queue's later responses wait behind it;
//   - -writers N the same with writes, whose data the target first reads
//     from the host (they overwrite -size bytes at -slba of the namespace,
//     over and over).
//
// Every command uses the same -size buffer of the host. Once everything
// is held it prints one line (holding=1 queue_pairs=N commands=N ...); at
// the signal it abandons its queue pairs and prints what it did (held=1
// closed_by_target=N errors=N). A holder the target closes, or that
// fails, sets up again a second later.
func hold(o options) error {
	if o.noConnect+o.readers+o.writers == 0 {
		return fmt.Errorf("nothing to hold: set -noconnect, -readers or -writers")
	}
	if (o.readers > 0 || o.writers > 0) && o.nqn == "" {
		return fmt.Errorf("-readers and -writers need -nqn")
	}
	if o.size <= 0 || o.size > 1<<20 || o.size%4096 != 0 {
		return fmt.Errorf("-size %d: a multiple of 4096 up to 1 MiB", o.size)
	}
	nsids, err := parseNSIDs(o.nsids)
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	var st holdStats
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	run := func(f func(first func()) error) {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			first := func() { once.Do(ready.Done) }
			defer first()
			for {
				err := f(first)
				select {
				case <-stop:
					return
				default:
				}
				switch {
				case errors.Is(err, errClosed):
					st.closed.Add(1)
				case err != nil:
					st.errors.Add(1)
					fmt.Fprintln(os.Stderr, "rdmahost hold:", err)
				}
				select { // a target that refuses is not hammered
				case <-stop:
					return
				case <-time.After(time.Second):
				}
			}
		}()
	}
	for range o.noConnect {
		run(func(first func()) error { return holdNoConnect(o, stop, &st, first) })
	}
	for range o.readers {
		run(func(first func()) error { return holdLarge(o, nsids[0], nvme.IORead, stop, &st, first) })
	}
	for range o.writers {
		run(func(first func()) error { return holdLarge(o, nsids[0], nvme.IOWrite, stop, &st, first) })
	}
	start := time.Now()
	go func() {
		ready.Wait()
		fmt.Printf("holding=1 queue_pairs=%d commands=%d size=%d secs=%.1f\n",
			st.queuePairs.Load(), st.commands.Load(), o.size, time.Since(start).Seconds())
	}()
	<-sig
	close(stop)
	wg.Wait()
	fmt.Printf("held=1 closed_by_target=%d errors=%d secs=%.1f\n", st.closed.Load(), st.errors.Load(), time.Since(start).Seconds())
	return nil
}

// holdStats are what the holders hold now and did so far.
type holdStats struct {
	queuePairs, commands atomic.Int64
	closed, errors       atomic.Int64 // holders the target closed, and that failed
}

// errClosed is a holder's queue pair the target closed: the holder takes
// it again.
var errClosed = errors.New("the target closed the queue pair")

// holdNoConnect keeps one queue pair connected without a Connect until
// stop or the target closes it.
func holdNoConnect(o options, stop <-chan struct{}, st *holdStats, first func()) error {
	c, err := rdmahost.Dial(o.addr, o.port, 0, uint16(o.qsize-1))
	if err != nil {
		return err
	}
	defer c.Abandon()
	st.queuePairs.Add(1)
	defer st.queuePairs.Add(-1)
	first()
	return waitClosed(c, stop)
}

// holdLarge connects a controller and an I/O queue, fills the queue with
// commands of opcode op and o.size bytes and stops receiving, until stop
// or the target closes a queue.
func holdLarge(o options, nsid uint32, op uint8, stop <-chan struct{}, st *holdStats, first func()) error {
	admin, cntlid, err := controller(o)
	if err != nil {
		return err
	}
	defer admin.Abandon()
	bs, err := blockSize(admin, nsid)
	if err != nil {
		return err
	}
	// One receive, for Connect's response: every other response finds
	// none.
	io, err := rdmahost.DialOptions(o.addr, o.port, 1, uint16(o.qsize-1), rdmahost.Options{Large: o.size, Receives: 1})
	if err != nil {
		return err
	}
	defer io.Abandon()
	io.StopReceiving()
	if st, _, err := io.Connect(o.host, o.nqn, cntlid, 0); err != nil || st != 0 {
		return fmt.Errorf("I/O Connect: status %#x, %v", st, err)
	}
	st.queuePairs.Add(2)
	defer st.queuePairs.Add(-2)
	addr, rkey, _ := io.LargeData()
	nlb := uint16(o.size / bs)
	posted := 0
	defer func() { st.commands.Add(int64(-posted)) }()
	for range o.qsize {
		cid := io.NextCID()
		cmd := rdmahost.ReadCommand(cid, nsid, o.slba, nlb, addr, uint32(o.size), rkey)
		if op == nvme.IOWrite {
			cmd = rdmahost.WriteCommand(cid, nsid, o.slba, nlb, addr, uint32(o.size), rkey)
		}
		if err := io.SendCapsule(cmd, nil); err != nil {
			return err
		}
		posted++
		st.commands.Add(1)
	}
	first()
	return waitClosed(io, stop)
}

// waitClosed returns nil at stop, or an error once the target closed c.
func waitClosed(c *rdmahost.Conn, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		closed, err := c.WaitClosed(200 * time.Millisecond)
		if err != nil {
			return err
		}
		if closed {
			return errClosed
		}
	}
}
