// Command nvmet-cfs mounts a FUSE file system shaped like the Linux NVMe
// target's configfs (/sys/kernel/config/nvmet) whose writes drive a
// running nvmeof-tgt.
//
// blktests' authentication tests (nvme/042 to 045) change the target's
// DH-HMAC-CHAP key, controller key, hash and DH group in the middle of a
// test by writing nvmet's configfs, then connect or re-authenticate at
// once. The external-target interface (nvme-target-control) has no hook
// for those changes, and a watcher would race the host's connect, so this
// shim applies each change inside the write(2): it runs
//
//	nvmeof-tgt ctl set host SUBSYS HOSTNQN [-dhchap-key K] [-dhchap-ctrl-key K]
//	    [-dhchap-hashes H] [-dhchap-dhgroups G]
//
// for every subsystem whose allow-list has the host, and fails the write
// with EINVAL when the daemon refuses. `set host` replaces all of a host's
// settings, so the shim keeps each host's full state, as configfs does.
//
// Layout: mkdir hosts/H makes host H with dhchap_key, dhchap_ctrl_key,
// dhchap_hash and dhchap_dhgroup; rmdir hosts/H forgets it.
//
// subsystems/ and ports/ mirror the daemon's (nvme/051, 057, 058): under
// subsystems/X/namespaces/, mkdir N makes a disabled namespace whose
// device_path, device_uuid, device_nguid, ana_grpid and resv_enable the
// shim keeps; writing 1 to enable adds it to the daemon (add_namespace,
// with reservations for resv_enable), 0 removes it, and ana_grpid moves
// an enabled one (set_namespace). The daemon's own namespaces (setup's)
// show there enabled. ports/P has addr_trtype, addr_adrfam, addr_traddr,
// addr_trsvcid, subsystems/ (links to the subsystems served on P) and
// ana_groups/G/ana_state (set_ana_state); mkdir ana_groups/G makes group
// G inaccessible, as nvmet does. These calls go to the admin socket
// ($NVMEOF_TGT_SOCKET, default /run/nvmeof-tgt/ctl.sock), not through
// ctl: nvme/051 alone makes 800 writes. A value nvmet refuses, or one the
// daemon refuses, fails the write with EINVAL; a device change on an
// enabled namespace fails with EBUSY, as in nvmet.
//
// It is test tooling: run it as root (it mounts with mount(2), no
// fusermount).
//
//	nvmet-cfs [DIR]    (default /sys/kernel/config/nvmet)
//
// Once the mount is live it prints "ready" on standard output and points
// standard output at standard error, so a caller may wait for that line.
// It serves until DIR is unmounted, or unmounts it on SIGINT or SIGTERM.
// The daemon is $NVMEOF_TGT (default nvmeof-tgt, from PATH); ctl finds
// its socket in $NVMEOF_TGT_SOCKET.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

func main() {
	log.SetPrefix("nvmet-cfs: ")
	log.SetFlags(0)
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: nvmet-cfs [DIR]    (default /sys/kernel/config/nvmet)")
	}
	flag.Parse()
	dir := "/sys/kernel/config/nvmet"
	switch flag.NArg() {
	case 0:
	case 1:
		dir = flag.Arg(0)
	default:
		flag.Usage()
		os.Exit(2)
	}
	tgt := os.Getenv("NVMEOF_TGT")
	if tgt == "" {
		tgt = "nvmeof-tgt"
	}
	srv, err := mount(dir, &cfs{tgt: tgt})
	if err != nil {
		log.Fatalf("mount %s: %v", dir, err)
	}
	log.Printf("serving %s (pid %d)", dir, os.Getpid())
	fmt.Println("ready")
	// The caller may read standard output until EOF: let go of it.
	if err := unix.Dup3(2, 1, 0); err != nil {
		log.Printf("standard output stays open: %v", err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		if err := srv.Unmount(); err != nil {
			log.Printf("unmount %s: %v", dir, err)
		}
	}()
	srv.Wait()
	log.Printf("%s unmounted", dir)
}
