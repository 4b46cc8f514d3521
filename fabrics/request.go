package fabrics

import (
	"sync/atomic"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// DataDir is the direction of a command's data transfer.
type DataDir uint8

const (
	DirNone       DataDir = iota
	DirHostToCtrl         // write-like: data travels host → target before execution
	DirCtrlToHost         // read-like: data travels target → host after execution
)

// MaxDataTransfer is the largest data transfer of one command (MDTS), as
// the Linux target's: hosts send up to 1 MiB, even through passthrough
// I/O the block layer cannot split.
const MaxDataTransfer = 1 << 20

// mdtsShift is MaxDataTransfer as the Identify MDTS field: a power of two in
// units of the minimum page size (4 KiB).
const mdtsShift = 8

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

	q          *Queue
	handler    func(*Queue, *Request) bool // false: completes later (AER)
	ns         *Namespace
	nsStats    *IOStats      // the queue's counters for ns
	held       *atomic.Int64 // the nsStats counter r is in flight in: ns's backend may be in use
	blocking   bool          // the handler may sleep: it runs on a worker
	longerData bool          // the data descriptor may be longer than Len (command.longerData)
	status     nvme.Status
	result     uint64
	off        int64  // byte offset of I/O commands
	length     int64  // byte length of I/O commands without data (write zeroes)
	started    int64  // monotonic nanoseconds at Prepare, for latency
	asyncSlot  uint32 // 1 + its slot while with an asynchronous backend, else 0
	resvGen    uint32 // the namespace's Preempt and Abort count at its reservation check
	resvSeen   bool   // resvGen is set: r passed a reservation check

	qos qosWait // waiting on its namespace's QoS limit (qos.go)

	// Fused Compare and Write: the first command waits for its second;
	// the second carries the first and completes it too. A second ready
	// before its first's data arrived is parked on the first.
	pair      *Request
	also      *Request
	parked    *Request
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
	if n < r.Len || n > r.Len && !r.longerData {
		// The descriptor describes the command's transfer exactly: SGLS
		// offers no SGL longer than the transfer (bit 16), so a longer
		// one is Data SGL Length Invalid too, as on the Linux target
		// (nvmet_check_transfer_len), but for the commands it lets read
		// only what they need (nvmet_check_data_len_lte).
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

// MaxKeyedDescriptors is how many keyed data blocks one command may carry in
// a Last Segment descriptor list (Identify MSDBD).
const MaxKeyedDescriptors = 16

// Keyed is one keyed SGL data block: a host buffer the transport reads
// from or writes to.
type Keyed struct {
	Addr       uint64
	Len        uint32
	Key        uint32
	Invalidate bool
}

// KeyedDescriptors resolves the command's data pointer into keyed data
// blocks: the descriptor itself, or the list a Last Segment descriptor
// points at in the in-capsule data. The blocks must cover the transfer.
func (r *Request) KeyedDescriptors(inline []byte, dst *[MaxKeyedDescriptors]Keyed) (int, nvme.Status) {
	sgl := r.Cmd.SGL()
	switch sgl.ID() {
	case nvme.SGLKeyed, nvme.SGLKeyedInvalidate:
		dst[0] = Keyed{sgl.Address(), sgl.KeyedLength(), sgl.Key(), sgl.ID() == nvme.SGLKeyedInvalidate}
		if st := r.CheckKeyedLength(dst[0].Len); st != 0 {
			return 0, st
		}
		return 1, 0
	case nvme.SGLLastSegmentOffset:
	default:
		return 0, nvme.StatusSGLInvalidType | nvme.DNR
	}
	off, n := sgl.Address(), sgl.Length()
	if n == 0 || n%nvme.SGLSize != 0 || n/nvme.SGLSize > MaxKeyedDescriptors {
		return 0, nvme.StatusSGLInvalidCount | nvme.DNR
	}
	if off > uint64(len(inline)) || uint64(n) > uint64(len(inline))-off {
		return 0, nvme.StatusSGLInvalidOffset | nvme.DNR
	}
	count := int(n / nvme.SGLSize)
	var total uint64
	for i := range count {
		d := nvme.SGLDescriptor(inline[off+uint64(i*nvme.SGLSize):][:nvme.SGLSize])
		if d.ID() != nvme.SGLKeyed {
			// Several keys cannot all be invalidated by one response.
			return 0, nvme.StatusSGLInvalidType | nvme.DNR
		}
		dst[i] = Keyed{d.Address(), d.KeyedLength(), d.Key(), false}
		total += uint64(dst[i].Len)
	}
	if total < uint64(r.Len) {
		return 0, nvme.StatusSGLInvalidData | nvme.DNR
	}
	return count, 0
}
