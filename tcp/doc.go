// Package tcp is the NVMe/TCP transport (NVMe/TCP Transport Specification
// 1.0): the PDU wire formats and digests (pdu.go), a listener per port and
// one connection per queue pair.
//
// A connection is served by one poller goroutine locked to its OS thread.
// It owns the socket outright: the listener takes each accepted socket out
// of the Go runtime, and the poller reads, writes and sleeps on it with its
// own system calls, poll(2) on the socket and an eventfd that backend
// workers, the queue's io_uring (fabrics.EventFDer) and the buffer pool
// write. The runtime's netpoller cannot wait on a socket and an eventfd at
// once from one goroutine: it would take a second goroutine and a channel
// hand-off per command to hear of finished backend work. While a host
// streams commands (its last sleep was short), the poller keeps reading
// for a moment after its work instead of sleeping at once, as the RDMA
// poller does (fabrics.Spin): a sleep and the wake-up cost a queue-depth-1
// command more than a few empty reads; a host that stops leaves it asleep.
//
// Received bytes go through a stage buffer, many small PDUs per read, and
// large data straight into its command's buffer (recv.go). Each pass
// queues the PDUs it produced, headers written in their request and data in
// place, and sends them in one writev (send.go). Write data not in the
// capsule is asked for with one R2T per command; the host splits it into
// H2CData PDUs of at most MaxH2CData. Data buffers, in-capsule data's
// included, come from a pool shared by every connection with a byte limit
// (pool.go): a command the pool cannot serve waits for a buffer and never
// fails, unless a change of access (fabrics' fence) refuses it meanwhile. No connection can hold the others up: each has a share of the
// pool, past which it borrows only while nobody waits within theirs, and
// a reserve serves admin commands and small transfers alone. A connection
// whose host sends no R2T's data, or reads none of its responses, within
// the data timeout is closed and gives its buffers back (stall.go).
//
// A host's PDU that breaks the protocol gets a C2HTermReq with the fatal
// error status the specification gives it, and the connection closes; a
// data digest error fails only its command, with Transient Transport Error,
// which the host retries. A connection that sends no ICReq and command
// capsule within fabrics.ConnectTimeout is closed; from Connect on, keep
// alive bounds it as on RDMA. Warnings a peer can cause are rate limited
// per port (warn.go); the metrics count every event. The poller's thread
// exits with it. TLS is not offered: a host that starts a TLS
// handshake is told so in the log and closed.
package tcp
