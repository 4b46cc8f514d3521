package rdmahost

import (
	"encoding/binary"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Command is one 64-byte submission queue entry.
type Command = [nvme.CommandSize]byte

// Response is one 16-byte completion queue entry.
type Response = [nvme.CompletionSize]byte

// CMRequest is the private data of the connection request for queue qid
// of hsqsize+1 entries (hsqsize is 0-based, as in the Connect command):
// record format 0, and as many responses as commands (hrqsize).
func CMRequest(qid, hsqsize uint16) []byte {
	b := make([]byte, nvme.CMRequestSize)
	nvme.CMRequest{QID: qid, HRQSize: hsqsize + 1, HSQSize: hsqsize}.Encode(b)
	return b
}

// newCommand is a command of opcode op and identifier cid whose data
// pointer is a null keyed descriptor, as the Linux host sends when there
// is no data.
func newCommand(c *Command, op uint8, cid uint16) nvme.Command {
	v := nvme.Command(c[:])
	v.SetOpcode(op)
	v.SetFlags(nvme.PSDTSGLContig)
	v.SetCID(cid)
	v.SGL().SetKeyed(0, 0, 0, false)
	return v
}

// ConnectCommand is a Fabrics Connect for queue qid of sqsize+1 entries
// (kato: keep alive timeout in ms, admin queue only) whose 1024 bytes of
// data travel in the capsule.
func ConnectCommand(cid, qid, sqsize uint16, kato uint32) Command {
	var c Command
	v := newCommand(&c, nvme.OpFabrics, cid)
	v.SetConnect(qid, sqsize, kato)
	v.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, nvme.ConnectDataSize)
	return c
}

// ConnectData is the data of a Connect: cntlid is 0xffff (any) on the
// admin queue and the controller's ID on I/O queues.
func ConnectData(hostNQN, subNQN string, cntlid uint16) []byte {
	b := make([]byte, nvme.ConnectDataSize)
	// A host ID of the host NQN's first bytes: stable per host, never zero.
	var id [nvme.HostIDSize]byte
	copy(id[:], hostNQN)
	nvme.ConnectData{HostID: id, CNTLID: cntlid, SubNQN: subNQN, HostNQN: hostNQN}.Encode(b)
	return b
}

// PropertySetCommand sets a controller register (4 bytes wide).
func PropertySetCommand(cid uint16, offset uint32, value uint32) Command {
	var c Command
	v := newCommand(&c, nvme.OpFabrics, cid)
	v.SetProperty(true, false, offset, uint64(value))
	return c
}

// PropertyGetCommand reads a controller register (4 bytes wide).
func PropertyGetCommand(cid uint16, offset uint32) Command {
	var c Command
	v := newCommand(&c, nvme.OpFabrics, cid)
	v.SetProperty(false, false, offset, 0)
	return c
}

// keyed points the command's data at length bytes of the host's memory.
func keyed(v nvme.Command, addr uint64, length, rkey uint32) {
	v.SGL().SetKeyed(addr, length, rkey, false)
}

// IdentifyCommand asks for the 4096-byte structure cns (of namespace
// nsid) to be written to addr (rkey).
func IdentifyCommand(cid uint16, cns uint8, nsid uint32, addr uint64, rkey uint32) Command {
	var c Command
	v := newCommand(&c, nvme.AdminIdentify, cid)
	v.SetNSID(nsid)
	v.SetCDW(10, uint32(cns))
	keyed(v, addr, 4096, rkey)
	return c
}

// ReadCommand reads nlb blocks (1-based) from slba of namespace nsid into
// length bytes at addr (rkey).
func ReadCommand(cid uint16, nsid uint32, slba uint64, nlb uint16, addr uint64, length, rkey uint32) Command {
	var c Command
	keyed(blocksCommand(&c, nvme.IORead, cid, nsid, slba, nlb), addr, length, rkey)
	return c
}

// blocksCommand makes c a read or write (op) of nlb blocks (1-based) at
// slba of namespace nsid, its data yet to point at.
func blocksCommand(c *Command, op uint8, cid uint16, nsid uint32, slba uint64, nlb uint16) nvme.Command {
	v := newCommand(c, op, cid)
	v.SetNSID(nsid)
	v.SetSLBA(slba)
	v.SetCDW(12, uint32(nlb-1))
	return v
}

// WriteInlineCommand writes nlb blocks (1-based) to slba of namespace
// nsid from length bytes of in-capsule data (an offset data block SGL):
// the capsule carries the data, as the Linux host sends small writes.
func WriteInlineCommand(cid uint16, nsid uint32, slba uint64, nlb uint16, length uint32) Command {
	var c Command
	blocksCommand(&c, nvme.IOWrite, cid, nsid, slba, nlb).SGL().SetOffset(nvme.SGLDataBlockOffset, 0, length)
	return c
}

// WriteCommand writes nlb blocks (1-based) to slba of namespace nsid from
// length bytes at addr (rkey), which the target reads with RDMA READs.
func WriteCommand(cid uint16, nsid uint32, slba uint64, nlb uint16, addr uint64, length, rkey uint32) Command {
	var c Command
	keyed(blocksCommand(&c, nvme.IOWrite, cid, nsid, slba, nlb), addr, length, rkey)
	return c
}

// KeepAliveCommand is a Keep Alive, which carries no data.
func KeepAliveCommand(cid uint16) Command {
	var c Command
	newCommand(&c, nvme.AdminKeepAlive, cid)
	return c
}

// Fields of a response capsule.

// CID is the identifier of the command a response completes.
func CID(r Response) uint16 { return nvme.Completion(r[:]).CID() }

// Status is the response's status field (SCT, SC, DNR, More; no phase).
func Status(r Response) uint16 { return uint16(nvme.Completion(r[:]).Status()) }

// Result is DW0 of the response: the controller ID of an admin Connect,
// the value of a Property Get.
func Result(r Response) uint32 { return binary.LittleEndian.Uint32(r[:4]) }
