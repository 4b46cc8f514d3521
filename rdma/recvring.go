package rdma

/*
#include <stdlib.h>
#include "verbs.h"
*/
import "C"

import (
	"fmt"
	"sync/atomic"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"golang.org/x/sys/unix"
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

	// A shared ring's accounting, for the metrics and the limit event.
	admin bool
	limit int // armed SRQ limit: the device warns when fewer are posted
	// posted is the entries posted and not yet seen completed: the
	// initial post plus what queue pairs fold in (srqCount). Exact once
	// every poller using the ring has folded, as it does before it
	// sleeps and at teardown.
	posted atomic.Int64
	// armed: the limit is set and has not fired since. Re-armed by a
	// fold that finds enough posted again, so that an exhausted queue
	// raises one event, not one per command.
	armed atomic.Bool
	// warned: the operator was told once to raise the depth.
	warned atomic.Bool
}

// newRecvRing registers n receive buffers with inline bytes of in-capsule
// data each.
func newRecvRing(d *device, n, inline int) (*recvRing, error) {
	stride := align(inline, pageSize)
	cmdOff := n * stride
	mem, err := registerRegion(d.pd, align(cmdOff+n*nvme.CommandSize, pageSize), recvRingAccess)
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

// recvRingAccess is a receive ring's access beyond local write: none.
// Only the device's own receives write it, on every transport; iWARP's
// remote write is for RDMA READ sinks (regionAccess), and granting it here
// would let any peer that guesses the key write the commands other hosts
// are about to run.
const recvRingAccess C.int = 0

// newSharedRing creates a shared receive queue of n entries with inline
// bytes of in-capsule data each, posts every entry and arms its limit.
func newSharedRing(d *device, n, inline int, admin bool) (*recvRing, error) {
	r, err := newRecvRing(d, n, inline)
	if err != nil {
		return nil, err
	}
	r.admin, r.limit = admin, srqLimit(n)
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
	r.posted.Store(int64(n))
	if err := r.arm(); err != nil {
		d.log.WithError(err).Warn("cannot arm the shared receive queue's limit: running short of receive buffers will show only in nvmeof_tgt_rdma_srq_posted_entries")
	}
	return r, nil
}

// srqLimit is the watermark armed on a shared receive queue of n entries:
// an eighth of it, at least one.
func srqLimit(n int) int { return max(n/8, 1) }

// arm sets the limit on the device, so that IBV_EVENT_SRQ_LIMIT_REACHED
// comes once fewer than r.limit entries are posted.
func (r *recvRing) arm() error {
	if ret := C.nt_arm_srq_limit(r.srq, C.int(r.limit)); ret != 0 {
		return fmt.Errorf("ibv_modify_srq(IBV_SRQ_LIMIT %d): %w", r.limit, unix.Errno(ret))
	}
	r.armed.Store(true)
	return nil
}

// fold adds a queue pair's count of posts less receive completions, and
// re-arms the limit once the ring has twice the limit posted again.
func (r *recvRing) fold(delta int64) {
	if delta == 0 {
		return
	}
	posted := r.posted.Add(delta)
	if shouldRearm(r.armed.Load(), posted, r.limit) && r.armed.CompareAndSwap(false, true) {
		if ret := C.nt_arm_srq_limit(r.srq, C.int(r.limit)); ret != 0 {
			r.armed.Store(false) // the next fold tries again
		}
	}
}

// shouldRearm: the limit fired, and the ring has recovered well above it,
// so that a queue hovering at the watermark does not raise an event per
// command.
func shouldRearm(armed bool, posted int64, limit int) bool {
	return !armed && posted >= 2*int64(limit)
}

// queueName is the ring's queue label in the metrics.
func (r *recvRing) queueName() string {
	if r.admin {
		return "admin"
	}
	return "io"
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
