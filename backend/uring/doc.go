// Package uring is a small io_uring binding: just what a namespace's data
// path needs (read, write with RWF_DSYNC, fdatasync), over raw system
// calls and mmap'd rings, with no cgo.
//
// A Ring belongs to one goroutine (a queue's poller) and takes no locks.
// Entries are identified by a caller's 64-bit tag, typically an index into
// a preallocated table, so that submitting and completing allocate nothing
// and no Go pointer is handed to the kernel as a tag.
//
// Buffers given to PrepRead and PrepWrite must stay reachable and unused
// until their completion is reaped: the kernel reads or writes them
// asynchronously.
package uring
