// Package daemon is the running target: it assembles fabrics' target, the
// transports' listeners and the namespaces' backends from a
// configuration (Start), and changes them to a new one touching only
// what differs (Apply: prepare opens everything that can fail, commit
// changes what runs; Reload reads the file first). It also keeps the
// target's lifetime counters across restarts (lifetime.go), reports
// health and readiness to systemd (notify.go, health.go), and runs the
// gateway group's lease runners (gateway.go).
//
// It reads no flags and speaks no JSON: the command (cmd/nvmeof-tgt)
// parses flags and wires the management API (package api), which drives
// a Daemon through the api.Daemon interface; Run takes the API's
// listener as its Control.
package daemon
