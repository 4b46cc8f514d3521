// Package rdma is the NVMe-oF RDMA transport: a thin cgo binding over
// librdmacm and libibverbs (the only cgo in the module), the connection
// manager listener that parses the NVMe-oF private data and accepts or
// rejects queue pairs, and the queue pairs themselves.
//
// Each queue pair owns one registered memory region (mmap'd, never the Go
// heap) holding its receive buffers, response capsules and data buffers,
// registered once when the queue pair is created. A single poller
// goroutine, locked to its OS thread, drives the queue pair: it polls the
// completion queue in batches, runs each command through its request
// state machine (see request states in queuepair.go) and posts every work
// request the pass produced in one chained post. When the queue pair is
// idle it arms the completion queue and sleeps on the completion channel
// and an eventfd that backend workers write when they finish.
//
// The package knows NVMe only as far as the capsule and its SGL; command
// semantics belong to package fabrics.
package rdma
