// Package fabrics is the NVMe over Fabrics target, independent of any
// transport: subsystems, namespaces, ports and host access (Target), the
// controllers hosts create with Connect (register state machine, keep
// alive, asynchronous events, features), the discovery controller, and the
// execution of admin and I/O commands against backends.
//
// A transport (package rdma, or the in-memory loop transport of this
// package's tests) owns the wire and the memory. For every queue pair it
// accepts it creates a Queue with NewQueue, and for every command capsule
// that arrives it drives one Request through:
//
//	Prepare  decode and validate; learn the data direction and length
//	MapInline / the transport's own SGL mapping, then any host-to-controller transfer
//	Execute  run the command; the result comes back through QueueTransport.Complete
//
// Complete is always called on the queue's own poller goroutine: commands
// that block (file and block device I/O) go to the queue's io_uring
// (ring.go, EngineIOURing) or run on per-queue workers, and are handed
// back through Reap, which the poller calls when Pending says so or after
// QueueTransport.Wake. Reap also submits the ring's queued entries, once
// per poll pass.
// So a queue's state is touched by one goroutine and the I/O path takes no
// lock that another queue contends.
//
// Admin and I/O commands are dispatched through one table per queue type
// (commands.go): opcode → handler, data direction and length, namespace
// and write-protection checks, and the effects the Commands Supported and
// Effects log reports, which is built from the same tables.
//
// Hosts with a DH-HMAC-CHAP secret authenticate each queue after Connect
// (auth.go): until they have, every command but Connect and Authentication
// Send/Receive fails with Authentication Required. The cryptography is
// package dhchap's; the per-queue state machine is here.
//
// Timers (keep alive, the authentication deadline) come from the target's Clock (clock.go): the wall
// clock in the daemon, a ManualClock that tests advance step by step.
//
// The target changes while hosts are connected (reconfigure.go): the
// namespaces of a subsystem are an immutable set swapped whole, and each
// I/O command counts itself in flight on its namespace in its own queue's
// counters, so removing a namespace can wait for the commands already
// dispatched to it without any lock on the I/O path.
//
// Asymmetric Namespace Access (ana.go): each port holds an immutable
// table of its ANA groups' states, swapped whole on change, which I/O
// commands read with one atomic load to fail a namespace whose group is
// not accessible through their port with a path related status.
package fabrics
