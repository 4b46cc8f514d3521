// Package nvme is the NVMe and NVMe over Fabrics wire vocabulary: submission
// and completion queue entries, SGL descriptors, opcodes, status codes,
// controller registers, Identify data structures, log pages, the in-band
// authentication messages (auth.go) and the RDMA CM private data of the
// NVMe-oF RDMA transport binding.
//
// Every type here is a view over a byte slice, read and written in place
// (little endian, offsets from the specification), in the style of
// gVisor's tcpip/header: decoding a received capsule allocates nothing and
// copies nothing. Views assume the caller checked the length with the
// matching Size constant; constructors that take untrusted input return an
// error instead.
//
// The package does no I/O and knows nothing of RDMA verbs, configuration
// or backends.
package nvme
