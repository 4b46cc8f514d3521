package uring

import "unsafe"

// The kernel ABI (include/uapi/linux/io_uring.h), the parts used here.

const (
	opFsync = 3
	opRead  = 22
	opWrite = 23

	fsyncDatasync = 1 // IORING_FSYNC_DATASYNC

	enterGetEvents = 1 // IORING_ENTER_GETEVENTS

	registerEventFD   = 4 // IORING_REGISTER_EVENTFD
	unregisterEventFD = 5

	offSQRing = 0
	offSQEs   = 0x10000000

	// Features this binding relies on: one mmap for both rings (5.4), no
	// dropped completions (5.5), and IORING_OP_READ/WRITE (5.6, which
	// also brought RW_CUR_POS, so it stands for them).
	featSingleMmap = 1 << 0
	featNoDrop     = 1 << 1
	featRWCurPos   = 1 << 3
	featsNeeded    = featSingleMmap | featNoDrop | featRWCurPos
)

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// sqe is a submission queue entry (struct io_uring_sqe).
type sqe struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	opFlags  uint32 // rw_flags, fsync_flags
	userData uint64
	bufIndex uint16
	pers     uint16
	spliceFD int32
	addr3    uint64
	pad      uint64
}

// cqe is a completion queue entry (struct io_uring_cqe).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// Sizes the kernel fixes; a compile-time check that the structs match.
var (
	_ [120 - unsafe.Sizeof(params{})]struct{}
	_ [unsafe.Sizeof(params{}) - 120]struct{}
	_ [64 - unsafe.Sizeof(sqe{})]struct{}
	_ [unsafe.Sizeof(sqe{}) - 64]struct{}
	_ [16 - unsafe.Sizeof(cqe{})]struct{}
	_ [unsafe.Sizeof(cqe{}) - 16]struct{}
)
