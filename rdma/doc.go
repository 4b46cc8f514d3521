// Package rdma is the NVMe-oF RDMA transport: a thin cgo binding over
// librdmacm and libibverbs (the only cgo in the module), the connection
// manager listener that parses the NVMe-oF private data and accepts or
// rejects queue pairs, and the queue pairs themselves.
//
// Registered memory belongs to the device, not to queue pairs, so that it
// follows the data in flight rather than the number of queues
// (bufferpool.go, pool.go). When a port first listens on a device, the
// device registers a data-buffer pool (buddy blocks of 4 KiB to 1 MiB,
// a region kept for small transfers, one line of waiters per block size
// across its queue pairs, a small cache per queue pair), the response
// capsules, and a shared receive queue per
// in-capsule size (recvring.go). Connecting a queue pair registers
// nothing; where the device has no SRQ, or it is turned off, a queue pair
// gets its own receive ring. A command the pool cannot serve waits in
// line, and never fails. No queue pair holds the pool from the others:
// each I/O queue pair has a share of it, and borrows past its share only
// while a reserve stays free (share.go). A command waiting on a QoS limit
// holds neither a data buffer nor its shared receive buffer (qos.go). A change
// of access fails the commands waiting for a data buffer that it refuses,
// instead of waiting for them (recheck.go).
//
// A single poller goroutine, locked to its OS thread, drives the queue
// pair: it polls the completion queue in batches, runs each command
// through its checked request state machine (request.go) and posts every
// work request the pass produced in one chained post. When the queue pair
// is idle it arms the completion queue and sleeps on the completion
// channel and an eventfd, which backend workers, the queue's io_uring and
// the pool (a grant to a waiting command) write. It spins briefly before
// it sleeps only while the host keeps it busy.
//
// Every post stays within the queue pair's send budget (credits.go): send
// queue slots and RDMA READs in flight. Requests that do not fit wait in
// order, so ibv_post_send never fails for want of room, and the completion
// queue is sized for everything that can be outstanding.
//
// Teardown is driven by the request states (drain.go): once fabrics let go
// of the queue, the queue pair goes to the error state and is polled until
// every request with work requests on the wire has its completion, the
// device reported its last receive from the shared receive queue, and the
// completion queue is empty; the queue pair is destroyed, and only then do
// requests, data buffers and receive entries go back.
//
// Lifetimes, from the longest: a listener's CM event channel outlives the
// CM ids of its queue pairs (conntable.go); a device (device.go: the
// protection domain and the one reader of its asynchronous events) lives
// while a queue pair or a listening id uses it; a queue pair's set-up frees
// whatever part of it got done when a step fails, and the connection alone
// is refused. When rdma_cm reports a device removed, everything using it
// is let go so the removal completes, and the listener listens again.
//
// The package knows NVMe only as far as the capsule and its SGL; command
// semantics belong to package fabrics.
package rdma
