// Command nvmeof-tgt is the NVMe over Fabrics target daemon. It reads one
// YAML configuration file, opens the namespaces' backends, listens on the
// configured RDMA ports and serves until SIGTERM or SIGINT, when it
// disconnects the hosts cleanly and exits.
//
// Usage:
//
//	nvmeof-tgt -config FILE           serve in the foreground
//	nvmeof-tgt -check -config FILE    validate the file and exit
//	nvmeof-tgt -version               print the version
package main
