// Command cmd serves a fake nvmeof-tgt admin socket for selftest.sh:
//
//	cmd SOCKET STATE LOG
//
// It prints "ready" once SOCKET listens and serves until SIGTERM; see
// package fakedaemon.
package main

import (
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/nvmeof-tgt/nvmeof-tgt/test/blktests/nvmet-cfs/fakedaemon"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: cmd SOCKET STATE LOG")
		os.Exit(2)
	}
	d, err := fakedaemon.Listen(os.Args[1], os.Args[2], os.Args[3])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	d.Close()
}
