package fabrics

import (
	"bytes"
	"encoding/binary"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func (q *Queue) prepareIO(r *Request) nvme.Status {
	cmd := r.Cmd
	if !q.ctrl.Ready() {
		return nvme.StatusCommandSequence | nvme.DNR
	}
	op := cmd.Opcode()
	if op == nvme.IOFlush && cmd.NSID() == 0xffffffff {
		r.handler = execFlushAll
		return 0
	}
	ns := q.ctrl.Subsystem.Namespace(cmd.NSID())
	if ns == nil {
		return nvme.StatusInvalidNamespace | nvme.DNR
	}
	if st := q.claim(r, ns); st != 0 {
		return st
	}
	switch op {
	case nvme.IORead, nvme.IOWrite, nvme.IOWriteZeroes, nvme.IOCompare:
		slba, nlb := cmd.SLBA(), uint64(cmd.NLB())+1
		if blocks := ns.Blocks(); slba >= blocks || nlb > blocks-slba {
			return nvme.StatusLBARange | nvme.DNR
		}
		r.off = int64(slba << ns.BlockShift)
		r.length = int64(nlb << ns.BlockShift)
		if op != nvme.IORead && op != nvme.IOCompare && ns.ReadOnly {
			return nvme.StatusNamespaceWriteProt | nvme.DNR
		}
		switch op {
		case nvme.IORead:
			if r.length > MaxDataTransfer {
				return nvme.StatusInvalidField | nvme.DNR
			}
			r.Dir, r.Len, r.handler = DirCtrlToHost, uint32(r.length), execRead
		case nvme.IOWrite, nvme.IOCompare:
			if r.length > MaxDataTransfer {
				return nvme.StatusInvalidField | nvme.DNR
			}
			r.Dir, r.Len, r.handler = DirHostToCtrl, uint32(r.length), execWrite
			if op == nvme.IOCompare {
				r.handler = execCompare
			}
		default:
			r.handler = execWriteZeroes
		}
	case nvme.IOFlush:
		r.handler = execFlush
	case nvme.IODatasetMgmt:
		if ns.ReadOnly {
			return nvme.StatusNamespaceWriteProt | nvme.DNR
		}
		nr := cmd.CDW(10)&0xff + 1
		r.Dir, r.Len, r.handler = DirHostToCtrl, nr*16, execDSM
	default:
		return nvme.StatusInvalidOpcode | nvme.DNR
	}
	return 0
}

// ioStatus maps a backend error to the status the host should see.
func ioStatus(err error, write bool) nvme.Status {
	if err == nil {
		return 0
	}
	if write {
		return nvme.StatusWriteFault
	}
	return nvme.StatusReadError
}

func execRead(q *Queue, r *Request) bool {
	r.status = ioStatus(r.ns.Backend.ReadAt(r.Data, r.off), false)
	if r.status == 0 {
		q.Stats.Reads.Add(1)
		q.Stats.BytesRead.Add(uint64(r.length))
	}
	return true
}

func execWrite(q *Queue, r *Request) bool {
	r.status = ioStatus(r.ns.Backend.WriteAt(r.Data, r.off), true)
	if r.status == 0 {
		q.Stats.Writes.Add(1)
		q.Stats.BytesWritten.Add(uint64(r.length))
	}
	return true
}

// compareBufs holds scratch buffers for Compare; Go allocates buffers this
// large on page boundaries, as O_DIRECT backends need.
var compareBufs = sync.Pool{New: func() any { b := make([]byte, MaxDataTransfer); return &b }}

// execCompare reads the range and compares it with the host's data.
func execCompare(q *Queue, r *Request) bool {
	bp := compareBufs.Get().(*[]byte)
	defer compareBufs.Put(bp)
	cur := (*bp)[:len(r.Data)]
	if err := r.ns.Backend.ReadAt(cur, r.off); err != nil {
		r.status = nvme.StatusReadError
		return true
	}
	if !bytes.Equal(cur, r.Data) {
		r.status = nvme.StatusCompareFailed
	}
	return true
}

func execFlush(q *Queue, r *Request) bool {
	r.status = ioStatus(r.ns.Backend.Flush(), true)
	return true
}

// execFlushAll flushes every namespace (Flush with the broadcast NSID).
func execFlushAll(q *Queue, r *Request) bool {
	s := q.ctrl.Subsystem
	for _, id := range s.NamespaceIDs() {
		if ns := s.Namespace(id); ns != nil {
			if err := ns.Backend.Flush(); err != nil {
				r.status = nvme.StatusWriteFault
			}
		}
	}
	return true
}

func execWriteZeroes(q *Queue, r *Request) bool {
	b := r.ns.Backend
	var err error
	// Deallocate (CDW12 bit 25) may punch a hole: it reads back as zeros too.
	if d, ok := b.(backend.Discarder); ok && r.Cmd.CDW(12)&(1<<25) != 0 {
		err = d.Discard(r.off, r.length)
	} else if z, ok := b.(backend.Zeroer); ok {
		err = z.WriteZeroes(r.off, r.length)
	} else {
		r.status = nvme.StatusInvalidOpcode | nvme.DNR
		return true
	}
	r.status = ioStatus(err, true)
	return true
}

func execDSM(q *Queue, r *Request) bool {
	ns := r.ns
	const attrDeallocate = 1 << 2
	if r.Cmd.CDW(11)&attrDeallocate == 0 {
		return true // hints only: nothing to do
	}
	d, ok := ns.Backend.(backend.Discarder)
	if !ok {
		return true // deallocation is advisory
	}
	for i := 0; i+16 <= len(r.Data); i += 16 {
		nlb := uint64(binary.LittleEndian.Uint32(r.Data[i+4:]))
		slba := binary.LittleEndian.Uint64(r.Data[i+8:])
		if blocks := ns.Blocks(); slba >= blocks || nlb > blocks-slba {
			r.status = nvme.StatusLBARange | nvme.DNR
			return true
		}
		if nlb == 0 {
			continue
		}
		if err := d.Discard(int64(slba<<ns.BlockShift), int64(nlb<<ns.BlockShift)); err != nil {
			r.status = nvme.StatusWriteFault
			return true
		}
	}
	return true
}
