// Package ctl is `nvmeof-tgt ctl`, the command line of the management API:
// Run parses one command (commands.go holds the table of verbs, verbs.go
// parses them), calls one method through the api package's client and
// prints the result (list.go). It needs no daemon state of its own: every
// command is one API call.
package ctl
