package rdmahost

/*
#cgo LDFLAGS: -libverbs -lrdmacm
#include <errno.h>
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// MaxInline is the most in-capsule data a capsule of this host carries:
// enough for Connect's data.
const MaxInline = nvme.ConnectDataSize

// DataSize is the host memory each command's data may use (one Identify
// structure, or 4 KiB of a Read).
const DataSize = 4096

// Timeout bounds every step that waits on the target: address and route
// resolution, the connection, and the responses Connect and the other
// synchronous commands wait for.
const Timeout = 10 * time.Second

// Work request IDs: the kind in the high half, the slot in the low.
const (
	wrSend = 1 << 32
	wrRecv = 2 << 32
)

// Conn is one queue pair to a target. It is not safe for concurrent use.
type Conn struct {
	c       C.struct_rh_conn
	qid     uint16
	hsqsize uint16

	mem              []byte // registered: send slots, receive slots, data, the large buffer
	nSend, nRecv     int
	sendOff, dataOff int
	nData            int
	largeOff, nLarge int
	starved          bool // receives that complete are not posted again

	sendNext, sending int // next send slot; sends not yet completed
	nextCID           uint16
	pending           []Response // responses read while waiting for a send slot
	dead              error      // a failed completion: the queue pair is in error
}

// Dial connects queue qid of hsqsize+1 entries (0-based, as the Connect
// command's SQSIZE) to the target at addr:port: the CM request carries
// the NVMe-oF private data, the queue pair has its own completion queue,
// and receives for the responses are posted before the request goes out.
// A rejected connection returns a *RejectError.
func Dial(addr string, port int, qid, hsqsize uint16) (*Conn, error) {
	return DialOptions(addr, port, qid, hsqsize, Options{})
}

// Options change what Dial sets up.
type Options struct {
	// Large is the bytes of one more data buffer, for transfers larger
	// than DataSize (LargeData): every command may use it at once,
	// as a host that cares nothing for its data would.
	Large int
	// Receives is how many receives are posted before the connection
	// request goes out (0: twice the queue's depth). With one, and
	// StopReceiving before Connect, only Connect's response finds one.
	Receives int
}

// DialOptions is Dial with o.
func DialOptions(addr string, port int, qid, hsqsize uint16, o Options) (*Conn, error) {
	depth := int(hsqsize) + 1
	cn := &Conn{qid: qid, hsqsize: hsqsize, nSend: 2 * depth, nRecv: 2 * depth, nData: depth, nLarge: o.Large}
	if o.Receives > 0 {
		cn.nRecv = min(o.Receives, cn.nRecv)
	}
	caddr, cport := C.CString(addr), C.CString(strconv.Itoa(port))
	defer C.free(unsafe.Pointer(caddr))
	defer C.free(unsafe.Pointer(cport))
	if err := errno("resolve "+addr, C.rh_resolve(&cn.c, caddr, cport, C.int(Timeout.Milliseconds()))); err != nil {
		cn.free()
		return nil, err
	}
	// Twice the queue's depth of sends and receives: Flood may post more
	// commands than the queue holds.
	err := errno("create queue pair", C.rh_create_qp(&cn.c, C.int(cn.nSend), C.int(cn.nRecv), C.int(cn.nSend+cn.nRecv), 0))
	if err == nil {
		err = cn.register()
	}
	for i := 0; err == nil && i < cn.nRecv; i++ {
		err = cn.postRecv(i)
	}
	if err != nil {
		cn.free()
		return nil, err
	}
	priv := CMRequest(qid, hsqsize)
	var reject C.int
	ret := C.rh_connect(&cn.c, unsafe.Pointer(&priv[0]), C.int(len(priv)), C.int(Timeout.Milliseconds()), &reject)
	if ret != 0 {
		cn.free()
		if reject != 0 {
			return nil, &RejectError{Status: uint16(reject)}
		}
		return nil, errno(fmt.Sprintf("connect queue %d to %s:%d", qid, addr, port), ret)
	}
	return cn, nil
}

// RejectError is a connection the target refused; Status is the reject
// status of its private data (nvme.CMReject*), 0xffff if it sent none.
type RejectError struct{ Status uint16 }

func (e *RejectError) Error() string {
	return fmt.Sprintf("rdmahost: connection rejected with status %#x", e.Status)
}

// register maps and registers the slots: sends of 64 bytes and MaxInline,
// receives of 16 bytes, and DataSize for each command's data.
func (cn *Conn) register() error {
	sendSlot := nvme.CommandSize + MaxInline
	cn.sendOff = cn.nRecv * nvme.CompletionSize
	cn.dataOff = (cn.sendOff + cn.nSend*sendSlot + DataSize - 1) / DataSize * DataSize
	cn.largeOff = cn.dataOff + cn.nData*DataSize
	size := cn.largeOff + cn.nLarge
	buf, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	cn.mem = buf
	return errno("register memory", C.rh_reg(&cn.c, unsafe.Pointer(&buf[0]), C.size_t(size)))
}

func (cn *Conn) addr(off int) uint64 { return uint64(uintptr(unsafe.Pointer(&cn.mem[off]))) }

func (cn *Conn) postRecv(slot int) error {
	ret := C.rh_post_recv(&cn.c, C.uint64_t(wrRecv|slot), C.uint64_t(cn.addr(slot*nvme.CompletionSize)), nvme.CompletionSize)
	return errno("post receive", ret)
}

// QID is the queue's ID.
func (cn *Conn) QID() uint16 { return cn.qid }

// NextCID returns a command identifier not used since the last wrap.
func (cn *Conn) NextCID() uint16 {
	cn.nextCID++
	return cn.nextCID
}

// Data is the host memory of command cid's data: its address and remote
// key for a keyed SGL, and the bytes the target writes there.
func (cn *Conn) Data(cid uint16) (addr uint64, rkey uint32, buf []byte) {
	off := cn.dataOff + int(cid)%cn.nData*DataSize
	return cn.addr(off), uint32(cn.c.mr.rkey), cn.mem[off : off+DataSize]
}

// LargeData is the buffer of Options.Large bytes: its address and remote
// key for a keyed SGL, and its bytes.
func (cn *Conn) LargeData() (addr uint64, rkey uint32, buf []byte) {
	if cn.nLarge == 0 {
		return 0, 0, nil
	}
	return cn.addr(cn.largeOff), uint32(cn.c.mr.rkey), cn.mem[cn.largeOff : cn.largeOff+cn.nLarge]
}

// StopReceiving posts no more receives: once the ones posted are used,
// the target's responses find none, and its device retries each (RNR)
// for as long as the target's queue pair allows, with the command's data
// buffer held. A host that stops reading its responses.
func (cn *Conn) StopReceiving() { cn.starved = true }

// SendCapsule posts cmd with inline (at most MaxInline bytes) as its
// in-capsule data and returns without waiting for the send to complete.
// Only when every send slot is taken does it wait for one.
func (cn *Conn) SendCapsule(cmd Command, inline []byte) error {
	if len(inline) > MaxInline {
		return fmt.Errorf("rdmahost: %d bytes of in-capsule data, at most %d", len(inline), MaxInline)
	}
	for cn.sending == cn.nSend {
		if err := cn.reap(Timeout, false); err != nil {
			return err
		}
	}
	if cn.dead != nil {
		return cn.dead
	}
	slot := cn.sendNext
	off := cn.sendOff + slot*(nvme.CommandSize+MaxInline)
	copy(cn.mem[off:], cmd[:])
	copy(cn.mem[off+nvme.CommandSize:], inline)
	n := nvme.CommandSize + len(inline)
	if err := errno("post send", C.rh_post_send(&cn.c, C.uint64_t(wrSend|slot), C.uint64_t(cn.addr(off)), C.uint32_t(n))); err != nil {
		return err
	}
	cn.sendNext = (slot + 1) % cn.nSend
	cn.sending++
	return nil
}

// ErrTimeout is a response that did not come in time.
var ErrTimeout = errors.New("rdmahost: no response in time")

// WaitResponse returns the next response capsule, waiting up to timeout.
func (cn *Conn) WaitResponse(timeout time.Duration) (Response, error) {
	for len(cn.pending) == 0 {
		if err := cn.reap(timeout, true); err != nil {
			return Response{}, err
		}
	}
	r := cn.pending[0]
	cn.pending = cn.pending[1:]
	return r, nil
}

// reap reads completions until one arrives that it wants (a response if
// forResponse, else a send slot) or timeout passes.
func (cn *Conn) reap(timeout time.Duration, forResponse bool) error {
	if cn.dead != nil {
		return cn.dead
	}
	var wcs [16]C.struct_rh_wc
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left < 0 {
			return ErrTimeout
		}
		n := C.rh_wait(&cn.c, &wcs[0], C.int(len(wcs)), C.int(left.Milliseconds()+1))
		if n < 0 {
			return errno("wait for completions", n)
		}
		got := false
		for _, wc := range wcs[:n] {
			if wc.status != C.IBV_WC_SUCCESS {
				cn.dead = fmt.Errorf("rdmahost: queue %d: work request %#x completed with %s",
					cn.qid, uint64(wc.wr_id), C.GoString(C.ibv_wc_status_str(uint32(wc.status))))
				return cn.dead
			}
			slot := int(wc.wr_id & (wrSend - 1))
			if wc.wr_id&wrRecv != 0 {
				var r Response
				copy(r[:], cn.mem[slot*nvme.CompletionSize:])
				cn.pending = append(cn.pending, r)
				if !cn.starved {
					if err := cn.postRecv(slot); err != nil {
						return err
					}
				}
				got = got || forResponse
				continue
			}
			cn.sending--
			got = got || !forResponse
		}
		if got {
			return nil
		}
	}
}

// Command sends cmd with inline and waits for its response.
func (cn *Conn) Command(cmd Command, inline []byte) (Response, error) {
	if err := cn.SendCapsule(cmd, inline); err != nil {
		return Response{}, err
	}
	want := nvme.Command(cmd[:]).CID()
	for {
		r, err := cn.WaitResponse(Timeout)
		if err != nil {
			return r, err
		}
		if CID(r) == want {
			return r, nil
		}
	}
}

// Connect sends the Fabrics Connect of this queue (its data in the
// capsule) and waits for the response: its status, and on the admin
// queue the controller ID the target gave (cntlid 0xffff asks for any).
func (cn *Conn) Connect(hostNQN, subNQN string, cntlid uint16, kato uint32) (status uint16, id uint16, err error) {
	cmd := ConnectCommand(cn.NextCID(), cn.qid, cn.hsqsize, kato)
	r, err := cn.Command(cmd, ConnectData(hostNQN, subNQN, cntlid))
	if err != nil {
		return 0, 0, err
	}
	return Status(r), uint16(Result(r)), nil
}

// Enable sets CC.EN on the admin queue's controller and waits for
// CSTS.RDY, so that I/O queues may connect.
func (cn *Conn) Enable() error {
	cc := uint32(nvme.CCEnable | 6<<nvme.CCIOSQEShift | 4<<nvme.CCIOCQEShift)
	r, err := cn.Command(PropertySetCommand(cn.NextCID(), nvme.RegCC, cc), nil)
	if err == nil && Status(r) != 0 {
		err = fmt.Errorf("rdmahost: Property Set CC: status %#x", Status(r))
	}
	if err != nil {
		return err
	}
	deadline := time.Now().Add(Timeout)
	for {
		r, err := cn.Command(PropertyGetCommand(cn.NextCID(), nvme.RegCSTS), nil)
		if err != nil {
			return err
		}
		if Status(r) == 0 && Result(r)&nvme.CSTSReady != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rdmahost: CSTS %#x (status %#x): not ready within %s", Result(r), Status(r), Timeout)
		}
	}
}

// PostIdentify sends an Identify of structure cns without waiting; the
// target writes it to Data(cid).
func (cn *Conn) PostIdentify(cns uint8, nsid uint32) (cid uint16, err error) {
	cid = cn.NextCID()
	addr, rkey, _ := cn.Data(cid)
	return cid, cn.SendCapsule(IdentifyCommand(cid, cns, nsid, addr, rkey), nil)
}

// Identify sends an Identify and waits: the structure and the status.
func (cn *Conn) Identify(cns uint8, nsid uint32) ([]byte, uint16, error) {
	cid := cn.NextCID()
	addr, rkey, buf := cn.Data(cid)
	r, err := cn.Command(IdentifyCommand(cid, cns, nsid, addr, rkey), nil)
	if err != nil {
		return nil, 0, err
	}
	return append([]byte(nil), buf...), Status(r), nil
}

// PostRead sends a Read of nlb blocks of blockSize from slba (at most
// DataSize bytes) without waiting; the data lands in Data(cid).
func (cn *Conn) PostRead(nsid uint32, slba uint64, nlb uint16, blockSize int) (cid uint16, err error) {
	length := int(nlb) * blockSize
	if nlb == 0 || length > DataSize {
		return 0, fmt.Errorf("rdmahost: a read of %d blocks of %d bytes: 1 to %d bytes", nlb, blockSize, DataSize)
	}
	cid = cn.NextCID()
	addr, rkey, _ := cn.Data(cid)
	return cid, cn.SendCapsule(ReadCommand(cid, nsid, slba, nlb, addr, uint32(length), rkey), nil)
}

// Flood posts n Keep Alive commands without waiting, however many the
// queue holds (n may exceed hsqsize+1 up to twice that): a host that
// breaks the queue size it asked for.
func (cn *Conn) Flood(n int) error {
	if n > cn.nSend {
		return fmt.Errorf("rdmahost: flood of %d commands: this queue posts at most %d", n, cn.nSend)
	}
	for range n {
		if err := cn.SendCapsule(KeepAliveCommand(cn.NextCID()), nil); err != nil {
			return err
		}
	}
	return nil
}

// WaitClosed waits up to timeout for the target to disconnect the queue
// pair; false if it is still connected then.
func (cn *Conn) WaitClosed(timeout time.Duration) (bool, error) {
	ret := C.rh_wait_disconnected(&cn.c, C.int(timeout.Milliseconds()))
	if ret == -C.ETIMEDOUT {
		return false, nil
	}
	return ret == 0, errno("wait for the disconnect", ret)
}

// Abandon destroys the queue pair, its completion queue, memory and CM id
// at once, without rdma_disconnect and with whatever commands are in
// flight: the target's RDMA WRITEs and SENDs then find no queue pair. The
// kernel's connection manager still sends a DREQ as the id goes.
func (cn *Conn) Abandon() { cn.free() }

// Close disconnects (the target sees a DREQ first) and then frees
// everything.
func (cn *Conn) Close() error {
	err := errno("rdma_disconnect", C.rh_disconnect(&cn.c))
	cn.free()
	return err
}

func (cn *Conn) free() {
	C.rh_destroy(&cn.c)
	if cn.mem != nil {
		syscall.Munmap(cn.mem)
		cn.mem = nil
	}
	if cn.dead == nil {
		cn.dead = errors.New("rdmahost: connection closed")
	}
}

// errno turns a negative errno from host.c into an error.
func errno(op string, ret C.int) error {
	if ret >= 0 {
		return nil
	}
	return fmt.Errorf("rdmahost: %s: %w", op, syscall.Errno(-ret))
}
