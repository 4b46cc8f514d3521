package rdma

/*
#include <stdlib.h>
#include "verbs.h"
*/
import "C"

import (
	"fmt"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// recvRing is a set of receive buffers: a 64-byte command and, when the
// port allows in-capsule data, a page-aligned segment for it, per entry.
// Shared (srq set), it backs a device's shared receive queue, which every
// queue pair of one in-capsule size on the device receives from, so that
// receive buffers follow the commands in flight, not the queues connected
// (as nvmet's SRQ and SPDK's per poll group). Otherwise it is one queue
// pair's own receive queue: the fallback for a device without SRQs.
type recvRing struct {
	mem    *memoryRegion
	cmd    [][]byte
	inline [][]byte
	srq    *C.struct_ibv_srq // nil: a queue pair's own
}

// newRecvRing registers n receive buffers with inline bytes of in-capsule
// data each.
func newRecvRing(d *device, n, inline int) (*recvRing, error) {
	stride := align(inline, pageSize)
	cmdOff := n * stride
	mem, err := registerRegion(d.pd, align(cmdOff+n*nvme.CommandSize, pageSize), d.caps().regionAccess())
	if err != nil {
		return nil, err
	}
	r := &recvRing{mem: mem, cmd: make([][]byte, n), inline: make([][]byte, n)}
	for i := range n {
		r.cmd[i] = slot(mem.buf, cmdOff+i*nvme.CommandSize, nvme.CommandSize)
		r.inline[i] = slot(mem.buf, i*stride, inline)
	}
	return r, nil
}

// newSharedRing creates a shared receive queue of n entries with inline
// bytes of in-capsule data each, and posts every entry.
func newSharedRing(d *device, n, inline int) (*recvRing, error) {
	r, err := newRecvRing(d, n, inline)
	if err != nil {
		return nil, err
	}
	var cerr C.int
	sge := 1
	if inline > 0 {
		sge = 2
	}
	if r.srq = C.nt_create_srq(d.pd, C.int(n), C.int(sge), &cerr); r.srq == nil {
		r.free()
		return nil, errnoErr(fmt.Sprintf("create shared receive queue of %d entries", n), cerr)
	}
	wrs, p, err := cArray[C.struct_nt_wr](n)
	if err != nil {
		r.free()
		return nil, err
	}
	defer C.free(p)
	for i := range n {
		r.fill(&wrs[i], int32(i))
	}
	var failed C.int
	if ret := C.nt_post(nil, r.srq, (*C.struct_nt_wr)(p), C.int(n), &failed); ret != 0 {
		r.free()
		return nil, fmt.Errorf("post %d receives to the shared receive queue: %w", n, errnoErr("ibv_post_srq_recv", -ret))
	}
	return r, nil
}

// fill makes w the receive of entry i.
func (r *recvRing) fill(w *C.struct_nt_wr, i int32) {
	cmd, inline := r.cmd[i], r.inline[i]
	*w = C.struct_nt_wr{wr_id: C.uint64_t(kindRecv | uint64(i)), laddr: C.uint64_t(addr(cmd)),
		len: C.uint32_t(len(cmd)), lkey: C.uint32_t(r.mem.lkey), op: C.NT_RECV}
	if len(inline) > 0 {
		w.laddr2, w.len2 = C.uint64_t(addr(inline)), C.uint32_t(len(inline))
	}
}

func (r *recvRing) shared() bool { return r != nil && r.srq != nil }

func (r *recvRing) free() {
	if r == nil {
		return
	}
	if r.srq != nil {
		C.ibv_destroy_srq(r.srq)
		r.srq = nil
	}
	r.mem.free()
	r.mem = nil
}
