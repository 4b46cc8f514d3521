// Command nvmeof-tgt is the NVMe over Fabrics target daemon. It reads one
// YAML configuration file, opens the namespaces' backends, listens on the
// configured RDMA and NVMe/TCP ports and serves until SIGTERM or SIGINT,
// when it disconnects the hosts cleanly and exits.
//
// This package is only flags, the version and wiring: package daemon runs
// the target (SIGHUP reloads the file, applying only the difference),
// package api serves the management API on a Unix socket, and package
// ctl is `nvmeof-tgt ctl`, its command line.
//
// Usage:
//
//	nvmeof-tgt -config FILE           serve in the foreground
//	nvmeof-tgt -check -config FILE    validate the file and exit
//	nvmeof-tgt -version               print the version
//	nvmeof-tgt ctl COMMAND            change or inspect the running daemon
package main
