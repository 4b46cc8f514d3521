//go:build !cgo

package metrics

// collectRDMA sends nothing: built without cgo, the binary has no RDMA
// transport (its ports are NVMe/TCP only).
func collectRDMA(emit) {}
