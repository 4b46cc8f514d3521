// Package targettest holds what the transports' unit tests share: a
// target with one port and a subsystem whose namespace 1 is a small file,
// and the process's thread and descriptor counts, which a connection must
// give back when it closes.
package targettest
