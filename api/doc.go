// Package api is the daemon's management API: JSON-RPC 2.0 over a Unix
// socket, one request per line (docs/operations.md documents each
// method, its parameters and its error codes).
//
// The server side (Listen, Handler) drives the daemon through the Daemon
// interface: every add_, set_ and remove_ method edits a copy of the
// running configuration and hands it to Daemon.Apply, under the daemon's
// edit lock, so the API changes exactly what a reload of the same file
// would. get_state reads the running target. The package never imports
// the daemon; the daemon's command wires the two together.
//
// The client side (Dial, Client.Call) and the exported parameter and
// result types are what `nvmeof-tgt ctl` uses, and what automation in Go
// can import.
package api
