package fabrics

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// DataDir is the direction of a command's data transfer.
type DataDir uint8

const (
	DirNone       DataDir = iota
	DirHostToCtrl         // write-like: data travels host → target before execution
	DirCtrlToHost         // read-like: data travels target → host after execution
)

// MaxDataTransfer is the largest data transfer of one command (MDTS), and
// the size of each request's data buffer in the transport.
const MaxDataTransfer = 128 << 10

// mdtsShift is MaxDataTransfer as the Identify MDTS field: a power of two in
// units of the minimum page size (4 KiB).
const mdtsShift = 5

// Request is one command in flight. Transports preallocate a pool of them
// per queue pair and reuse them; fabrics keeps no reference after
// QueueTransport.Complete.
type Request struct {
	Cmd  nvme.Command    // the 64-byte submission entry, in the transport's receive buffer
	Rsp  nvme.Completion // the 16-byte response, in the transport's send buffer
	Data []byte          // the data buffer, Len bytes once the transport mapped the SGL
	Dir  DataDir         // set by Prepare
	Len  uint32          // data length the command transfers, set by Prepare
	Tag  int             // the transport's own index for this request

	q       *Queue
	handler func(*Queue, *Request) bool // false: completes later (AER)
	ns      *Namespace
	status  nvme.Status
	result  uint64
	off     int64 // byte offset of I/O commands
	length  int64 // byte length of I/O commands without data (write zeroes)
	started int64 // monotonic nanoseconds at Prepare, for latency

	// Fused Compare and Write: the first command waits, held, for its
	// second; the second carries the first and completes it too.
	pair      *Request
	also      *Request
	fuseReady bool
	fuseAbort bool
}

// Status is the status the command completed with.
func (r *Request) Status() nvme.Status { return r.status }

// MapInline points Data at the command's in-capsule data, described by an
// offset data block SGL. inline is what arrived after the 64-byte entry.
func (r *Request) MapInline(inline []byte) nvme.Status {
	sgl := r.Cmd.SGL()
	off, n := sgl.Address(), sgl.Length()
	if r.Dir != DirHostToCtrl {
		// In-capsule data only carries host-to-controller data.
		return nvme.StatusSGLInvalidType | nvme.DNR
	}
	if off != 0 || uint64(n) > uint64(len(inline)) {
		return nvme.StatusSGLInvalidOffset | nvme.DNR
	}
	if n < r.Len {
		return nvme.StatusSGLInvalidData | nvme.DNR
	}
	r.Data = inline[:r.Len]
	return nvme.StatusSuccess
}

// CheckKeyedLength validates the length of a keyed SGL against the
// command's transfer length. A host buffer longer than the transfer is
// allowed (the rest is left untouched), a shorter one is not.
func (r *Request) CheckKeyedLength(sglLen uint32) nvme.Status {
	if sglLen < r.Len {
		return nvme.StatusSGLInvalidData | nvme.DNR
	}
	return nvme.StatusSuccess
}
