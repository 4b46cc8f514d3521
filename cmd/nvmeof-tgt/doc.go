// Command nvmeof-tgt is the NVMe over Fabrics target daemon. It reads one
// YAML configuration file, opens the namespaces' backends, listens on the
// configured RDMA ports and serves until SIGTERM or SIGINT, when it
// disconnects the hosts cleanly and exits.
//
// While it runs, SIGHUP re-reads the file and applies only the difference
// (reload.go), and a Unix socket takes the same changes as JSON-RPC calls
// (package api), which `nvmeof-tgt ctl` makes (ctl*.go). Both go
// through daemon.Apply, which opens everything that can fail before it
// changes anything running.
//
// Usage:
//
//	nvmeof-tgt -config FILE           serve in the foreground
//	nvmeof-tgt -check -config FILE    validate the file and exit
//	nvmeof-tgt -version               print the version
//	nvmeof-tgt ctl COMMAND            change or inspect the running daemon
package main
