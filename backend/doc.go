// Package backend is the storage behind namespaces: reads and writes at a
// byte offset into caller buffers, flush, discard and write zeroes. Kinds
// register by name (file, block, nullblk) and are opened with Open.
//
// The package knows nothing of NVMe or RDMA. Callers pass buffers in
// registered, page-aligned memory so that O_DIRECT works.
package backend
