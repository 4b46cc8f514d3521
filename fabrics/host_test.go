package fabrics

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// memBackend keeps a namespace in memory.
type memBackend struct {
	mu      sync.Mutex
	data    []byte
	bs      uint32
	flushes int
}

func newMem(size int, bs uint32) *memBackend { return &memBackend{data: make([]byte, size), bs: bs} }

func (m *memBackend) ReadAt(p []byte, off int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	copy(p, m.data[off:])
	return nil
}
func (m *memBackend) WriteAt(p []byte, off int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	copy(m.data[off:], p)
	return nil
}
func (m *memBackend) Flush() error      { m.mu.Lock(); m.flushes++; m.mu.Unlock(); return nil }
func (m *memBackend) Size() int64       { return int64(len(m.data)) }
func (m *memBackend) BlockSize() uint32 { return m.bs }
func (m *memBackend) Close() error      { return nil }
func (m *memBackend) Discard(off, n int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.data[off : off+n])
	return nil
}

// Traits: like a file, a write cache to flush and holes that read zeros.
func (m *memBackend) Traits() backend.Traits {
	return backend.Traits{VolatileCache: true, DiscardZeroes: true}
}

var _ backend.Discarder = (*memBackend)(nil)

const (
	testNQN  = "nqn.2026-11.io.example:vol1"
	testHost = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000001"
)

// testTarget has one port and one subsystem with a 1 MiB namespace.
func testTarget(t testing.TB) (*Target, *Port, *memBackend) {
	t.Helper()
	mem := newMem(1<<20, 512)
	tg, p := targetWith(t, mem)
	return tg, p, mem
}

// targetWith has one port and one subsystem whose namespace 1 is b.
func targetWith(t testing.TB, b backend.Backend) (*Target, *Port) {
	t.Helper()
	tg := NewTarget(nil)
	p := &Port{ID: 1, Address: netip.MustParseAddr("10.0.0.1"), ServiceID: 4420, InlineDataSize: 8192, MaxQueueSize: 128}
	if err := tg.AddPort(p); err != nil {
		t.Fatal(err)
	}
	s := NewSubsystem(testNQN, "", "", true)
	ns, err := NewNamespace(1, b, false, [16]byte{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddNamespace(ns); err != nil {
		t.Fatal(err)
	}
	if err := tg.AddSubsystem(s); err != nil {
		t.Fatal(err)
	}
	return tg, p
}

// addNamespace publishes b as namespace nsid of the test subsystem.
func addNamespace(t testing.TB, tg *Target, nsid uint32, b backend.Backend) *Namespace {
	t.Helper()
	ns, err := NewNamespace(nsid, b, false, [16]byte{byte(nsid)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Subsystem(testNQN).AddNamespace(ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// host drives one controller through loop queues.
type host struct {
	t     *testing.T
	admin *LoopQueue
	io    *LoopQueue
	cid   uint16
	cntl  uint16
}

func newCmd(op uint8) nvme.Command {
	c := make(nvme.Command, nvme.CommandSize)
	c.SetOpcode(op)
	c.SetFlags(nvme.PSDTSGLContig)
	// No data: a null keyed descriptor, as the Linux host sends.
	c.SGL().SetKeyed(0, 0, 0, false)
	return c
}

// flushCmd is a Flush of namespace nsid.
func flushCmd(nsid uint32) nvme.Command {
	c := newCmd(nvme.IOFlush)
	c.SetNSID(nsid)
	return c
}

// keyed points the command's SGL at a host buffer of n bytes.
func keyed(c nvme.Command, n int) nvme.Command {
	c.SGL().SetKeyed(0, uint32(n), 0x1234, false)
	return c
}

func (h *host) submit(q *LoopQueue, c nvme.Command, data []byte) nvme.Completion {
	h.t.Helper()
	h.cid++
	c.SetCID(h.cid)
	rsp, err := q.Submit(c, data)
	if err != nil {
		h.t.Fatalf("submit opcode %#x: %v", c.Opcode(), err)
	}
	if rsp.CID() != h.cid {
		h.t.Fatalf("completion cid %d, want %d", rsp.CID(), h.cid)
	}
	return rsp
}

func connectCmd(qid, sqsize uint16, kato uint32, inline bool) nvme.Command {
	c := newCmd(nvme.OpFabrics)
	c.SetConnect(qid, sqsize, kato)
	if inline {
		c.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, nvme.ConnectDataSize)
	} else {
		c.SGL().SetKeyed(0, nvme.ConnectDataSize, 1, true)
	}
	return c
}

func connectData(subnqn, hostnqn string, cntlid uint16) []byte {
	b := make([]byte, nvme.ConnectDataSize)
	nvme.ConnectData{HostID: [16]byte{9}, CNTLID: cntlid, SubNQN: subnqn, HostNQN: hostnqn}.Encode(b)
	return b
}

// connect creates a controller, enables it and connects one I/O queue.
func connect(t *testing.T, tg *Target, p *Port, subnqn string) *host {
	t.Helper()
	h := adminOnly(t, tg, p, subnqn, 0)
	h.setProperty(nvme.RegCC, nvme.CCEnable|6<<nvme.CCIOSQEShift|4<<nvme.CCIOCQEShift)
	if csts := h.getProperty(nvme.RegCSTS, false); csts&nvme.CSTSReady == 0 {
		t.Fatalf("CSTS %#x after enable, want RDY", csts)
	}
	if subnqn == nvme.DiscoveryNQN {
		return h
	}
	h.io = NewLoopQueue(tg, p, 1, 128)
	rsp := h.submit(h.io, connectCmd(1, 127, 0, true), connectData(subnqn, testHost, h.cntl))
	if rsp.Status() != 0 {
		t.Fatalf("io connect: %v", rsp.Status())
	}
	return h
}

func (h *host) setProperty(off uint32, v uint64) {
	h.t.Helper()
	c := newCmd(0)
	c.SetProperty(true, false, off, v)
	if rsp := h.submit(h.admin, c, nil); rsp.Status() != 0 {
		h.t.Fatalf("property set %#x: %v", off, rsp.Status())
	}
}

func (h *host) getProperty(off uint32, size8 bool) uint64 {
	h.t.Helper()
	c := newCmd(0)
	c.SetProperty(false, size8, off, 0)
	rsp := h.submit(h.admin, c, nil)
	if rsp.Status() != 0 {
		h.t.Fatalf("property get %#x: %v", off, rsp.Status())
	}
	return rsp.Result()
}

func (h *host) identify(cns uint8, nsid uint32) ([]byte, nvme.Status) {
	c := keyed(newCmd(nvme.AdminIdentify), nvme.IdentifySize)
	c.SetNSID(nsid)
	c.SetCDW(10, uint32(cns))
	b := make([]byte, nvme.IdentifySize)
	return b, h.submit(h.admin, c, b).Status()
}

func (h *host) getLog(lid uint8, n int, off uint64) ([]byte, nvme.Status) {
	c := keyed(newCmd(nvme.AdminGetLogPage), n)
	numd := uint32(n/4 - 1)
	c.SetCDW(10, uint32(lid)|numd<<16)
	c.SetCDW(11, numd>>16)
	c.SetCDW(12, uint32(off))
	c.SetCDW(13, uint32(off>>32))
	b := make([]byte, n)
	return b, h.submit(h.admin, c, b).Status()
}

func (h *host) rw(op uint8, nsid uint32, slba uint64, nlb int, data []byte, inline bool) nvme.Status {
	c := newCmd(op)
	c.SetNSID(nsid)
	c.SetSLBA(slba)
	c.SetCDW(12, uint32(nlb-1))
	if inline {
		c.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, uint32(len(data)))
	} else {
		keyed(c, len(data))
	}
	return h.submit(h.io, c, data).Status()
}

func le32(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
func le16(b []byte, off int) uint16 { return binary.LittleEndian.Uint16(b[off:]) }

func trimNUL(b []byte) string { return string(bytes.TrimRight(b, "\x00 ")) }
