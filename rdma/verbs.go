package rdma

/*
#cgo LDFLAGS: -libverbs -lrdmacm
#include <stdlib.h>
#include "verbs.h"
*/
import "C"

import (
	"fmt"
	"syscall"
	"unsafe"
)

// errnoErr turns a negative errno returned by the C helpers into an error.
func errnoErr(op string, ret C.int) error {
	if ret >= 0 {
		return nil
	}
	return fmt.Errorf("%s: %w", op, syscall.Errno(-ret))
}

// memoryRegion is an mmap'd region registered with one protection domain.
type memoryRegion struct {
	buf  []byte
	mr   *C.struct_ibv_mr
	lkey uint32
}

// registerRegion maps and registers size bytes. access adds to local
// write what the device needs (remote write on iWARP, see regionAccess).
func registerRegion(pd *C.struct_ibv_pd, size int, access C.int) (*memoryRegion, error) {
	buf, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	mr, err := C.ibv_reg_mr(pd, unsafe.Pointer(&buf[0]), C.size_t(size), C.IBV_ACCESS_LOCAL_WRITE|access)
	if mr == nil {
		syscall.Munmap(buf)
		return nil, fmt.Errorf("register %d bytes of memory: %w", size, err)
	}
	registeredBytes.Add(int64(size))
	return &memoryRegion{buf: buf, mr: mr, lkey: uint32(mr.lkey)}, nil
}

func (m *memoryRegion) free() {
	if m == nil {
		return
	}
	C.ibv_dereg_mr(m.mr)
	registeredBytes.Add(-int64(len(m.buf)))
	syscall.Munmap(m.buf)
}

// addr is the address of b, which must lie in registered memory.
func addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// cArray allocates n zeroed elements of T in C memory, so the C helpers can
// read and write them without Go's pointer-passing rules getting involved.
// The caller frees p with C.free.
func cArray[T any](n int) ([]T, unsafe.Pointer, error) {
	var zero T
	p := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(zero)))
	if p == nil {
		return nil, nil, fmt.Errorf("allocate %d work request entries: out of memory", n)
	}
	return unsafe.Slice((*T)(p), n), p, nil
}
